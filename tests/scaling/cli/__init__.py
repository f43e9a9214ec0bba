"""Tests of scaling.cli: the command's views, the live bar, the driver lock, the MLflow link."""
