"""Whole studies end to end across the rooms: local, Slurm, LR search, looks, downstream tasks."""
