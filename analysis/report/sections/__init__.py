"""The report's sections, one verdict.json part each: code, looks, D, tasks, cost, stability."""
