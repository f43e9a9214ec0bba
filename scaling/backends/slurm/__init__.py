"""The Slurm backend, everything of it and nothing else: `executor` (`SlurmExecutor`, its class),
`queue` (what squeue says of its jobs, with back-off, and scancel), `submit` (the array
submitter that keeps within the cluster's limits), `limits` (those limits, read from Slurm) and
`parameters` (each job's sbatch options)."""
