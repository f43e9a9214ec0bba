"""The MLflow-backed state of a study: its parent and child runs, each cell's state and the
grid's status, the cache of finished runs, the REST reader, stale-code detection, and the
jobs' records (`scaling.state.files.job_records`; what each backend says of its jobs is
`scaling.backends`).
"""
