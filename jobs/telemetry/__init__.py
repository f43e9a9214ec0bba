"""What a run reports: the MLflow tracker and its spool, the run record."""
