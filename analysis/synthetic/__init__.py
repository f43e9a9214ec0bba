"""Studies whose truth is known, for tests, the benchmark and trying the report out:
``studies`` (exact scaling laws per arm) and ``scenarios`` (imperfect studies where a naive
verdict goes wrong). Builds run tables as ``analysis.tables`` reads them.
"""
