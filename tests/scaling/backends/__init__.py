"""Tests of scaling.backends: the local executor's devices and GPUs."""
