"""Tests of `scaling.inference_cost`."""
