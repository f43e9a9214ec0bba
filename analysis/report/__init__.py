"""What a person reads: numbers rounded to their intervals (``fmt``), the headline, the report
(``document``: report.md and report.html, from ``render``'s blocks), the figures (``figures``,
``plots``, ``training_curves``) and the terminal's verdict lines (``terminal``).

- ``sections``: the report's sections that each read one part of verdict.json (code, LR
  selection, looks, the token axis, downstream tasks, inference cost, stability).

Reads the analysis (``analysis.stats``); nothing in ``stats`` or ``tables`` imports it back.
"""
