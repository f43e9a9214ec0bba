"""The MLflow-backed state of a study: its parent and child runs, each cell's state and the
grid's status, the cache of finished runs, the REST reader, stale-code detection, and what the
scheduler says about the jobs (their records: `scaling.state.files.job_records`).
"""
