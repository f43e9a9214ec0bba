"""Tests of scaling.state: the MLflow-backed state, the scheduler's records, stale code."""
