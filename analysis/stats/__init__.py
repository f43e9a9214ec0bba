"""The analysis itself: run table in, verdict dict out, with no I/O (one exception:
``power.noise_from_source`` reads a finished study through ``analysis.tables`` for
``scaling plan --noise``).

``core`` runs the whole analysis (``analyse``); it lives here rather than at the package top
because it is pure statistics (no files, no MLflow) and the report's figures read the
``Analysis`` it returns: with ``core`` in this room every arrow points one way, tables <- stats
<- report <- api/cli. The rest: fits (``fit``, ``batchfit``, ``laws``), seed noise (``noise``,
``diagnose``), cells and the LR frontier (``cells``, ``frontier``), gain tests (``compare``,
``robust``, ``intervals``, ``levels``, ``matched``, ``held``), the verdict rules (``verdict``
along N, ``verdict_d`` and ``tokens`` along D), power and verdict.json's side tables
(``power``, ``summary``).
"""
