"""Tests of analysis.stats.looks."""
