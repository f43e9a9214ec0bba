"""The executors, one class per backend (local, Slurm, session), and the jobs each one runs."""
