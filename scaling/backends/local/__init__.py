"""The local backend, everything of it and nothing else: `executor` (`LocalExecutor`, its class,
and its jobs' liveness), `round` (`LocalRound`: a round's cells a few at once), `devices` (the
machine's GPUs as cells hold them) and `session` (submitit's local executor, each controller in
a session of its own)."""
