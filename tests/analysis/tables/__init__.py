"""Tests of analysis.tables."""
