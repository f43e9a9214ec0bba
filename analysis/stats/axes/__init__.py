"""The verdict along other axes: token budgets (``tokens``), downstream tasks (``downstream``)."""
