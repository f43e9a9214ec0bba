"""Tests of analysis.stats.planning."""
