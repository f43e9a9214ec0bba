"""Tests of scaling.rounds.backends: the local executor's devices and GPUs."""
