"""Where a study's cells run: one room per backend, as submitit has one executor per backend.

- `base`: what every backend implements (`JobBackend`), the registry of backends by name
  (`BACKENDS`, `BackendName`), and the study-wide `live_jobs` / `cancel_jobs` that ask each
  record's backend about its own jobs. Below the spec and `scaling.state`, which read it.
- `queued`: a cell that waits in a `scaling submit` process (`queued-<pid>` records).
- `executors`: `Executor`, the submitting half every backend's class adds, and `executor_for`.
- `local/`: the local backend (its executor, rounds, device slots, submitit session executor).
- `slurm/`: the Slurm backend (its executor, squeue and scancel, the array submitter, the
  cluster's limits, the sbatch parameters).
"""
