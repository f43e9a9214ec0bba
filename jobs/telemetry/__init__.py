"""What a run reports: the MLflow tracker, spool, uploads, system metrics, the run record."""
