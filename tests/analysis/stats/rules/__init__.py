"""Tests of analysis.stats.rules."""
