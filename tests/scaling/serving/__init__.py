"""Tests of `scaling.serving`."""
