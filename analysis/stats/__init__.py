"""The analysis itself: run table in, verdict dict out, with no I/O (one exception:
``planning.power.noise_from_source`` reads a finished study through ``analysis.tables`` for
``scaling plan --noise``).

``core`` runs the whole analysis (``analyse``); it lives here rather than at the package top
because it is pure statistics (no files, no MLflow) and the report's figures read the
``Analysis`` it returns: with ``core`` in this room every arrow points one way, tables <- stats
<- report <- api/cli. ``inference`` (cost ratios to the baseline) sits beside it. Sub-packages:

- ``fits``: the Approach-3 fitter (``fit``), its batched form (``batchfit``), the laws (``laws``).
- ``variance``: seed noise (``noise``), cell losses per draw (``cells``), checks (``diagnose``).
- ``lr``: the LR frontier (``frontier``), LR transfer by law (``lr_law``), ``stability``.
- ``gains``: paired gains (``compare``), the gain test (``robust``), matched compute
  (``matched``), ``intervals``, the token axis (``tokens``), downstream tasks (``downstream``).
- ``rules``: error levels (``levels``), the verdict along N (``verdict``) and D (``verdict_d``),
  the conditional verdict (``held``), verdict.json's side tables (``summary``).
- ``looks``: sequential seeds: ``spending``, a look (``sequential``), its ``outcome``, ``replay``.
- ``planning``: the power planner (``power``) and a sequential design's cost (``seq_cost``).
"""
