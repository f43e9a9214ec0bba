"""Tests of analysis.stats.axes."""
