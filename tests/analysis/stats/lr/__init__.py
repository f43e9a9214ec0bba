"""Tests of analysis.stats.lr."""
