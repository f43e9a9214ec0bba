"""Downstream tasks through lm-evaluation-harness: the model wrapper (`harness`), the tasks the
project ships (`tasks/`, offline) and one cell's evaluation, run once at the end of its job
(`run.evaluate_cell`). `lm_eval` is imported only when a cell evaluates or a study names a task
the project does not ship."""
