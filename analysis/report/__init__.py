"""What a person reads: numbers rounded to their intervals (``fmt``), the headline, the report
(``document``: report.md and report.html), the figures and the terminal's verdict lines.

Reads the analysis (``analysis.stats``); nothing in ``stats`` or ``tables`` imports it back.
"""
