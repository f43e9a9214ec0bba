"""Tests of analysis.report."""
