"""The analysis itself: run table in, verdict dict out, with no I/O (one exception:
``planning.power.noise_from_source`` reads a finished study through ``analysis.tables`` for
``scaling plan --noise``).

``analyze`` runs the whole analysis (``analyse``); it lives here rather than at the package top
because it is pure statistics (no files, no MLflow) and the report's figures read the
``Analysis`` it returns: with ``analyze`` in this room every arrow points one way, tables <- stats
<- report <- api/cli. ``inference`` (cost ratios to the baseline) sits beside it, and
``backtest`` (the study refitted without its top size, predicting it) below it. Sub-packages:

- ``fits``: the Approach-3 fitter (``fit``), its batched form (``batchfit``), the laws (``laws``).
- ``variance``: seed noise (``noise``), cell losses per draw (``cells``), checks (``diagnose``),
  the runs left out and why (``excluded``).
- ``lr``: the LR frontier (``frontier``), where its optimum lies with diverged LRs read as
  censoring (``optimum``), LR transfer by law (``lr_law``), ``stability``.
- ``gains``: paired gains (``compare``), the gain test (``robust``), matched compute
  (``matched``), ``intervals``, the error levels with the bootstrap interval and p (``levels``).
- ``planning``: the power planner (``power``).
- ``rules``: one variant's evidence, all the rule reads of it (``evidence``), the verdict along
  N (``verdict``) and D (``verdict_tokens``), the conditional verdict's guards
  (``verdict_guards``), verdict.json's side tables (``summary``). Each takes the `Judgement`
  (``analysis.tables.judgement``) whole: its margin and level are never passed one by one.
- ``axes``: the verdict along other axes: token budgets (``tokens``), downstream tasks
  (``downstream``).
- ``looks``: sequential seeds: ``spending``, a look (``sequential``), its ``outcome``, ``replay``,
  a sequential design's cost (``seq_cost``).

Each room imports only the rooms before it (tests/test_imports.py): lr <- variance <- fits <-
gains <- planning <- rules <- axes <- backtest <- analyze <- looks; ``inference`` imports none of
them.
"""
