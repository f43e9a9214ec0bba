"""Tests of analysis.stats.gains."""
