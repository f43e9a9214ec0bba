"""Tests of the scheduler's view of the jobs (scaling.state.scheduler) and their records."""
