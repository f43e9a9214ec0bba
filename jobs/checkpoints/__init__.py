"""Checkpoints: atomic per-rank saves, resume, a fork from another run's kept checkpoint."""
