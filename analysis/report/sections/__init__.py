"""The report's sections, one verdict.json part each: code, LR, looks, D, tasks, cost, stability."""
