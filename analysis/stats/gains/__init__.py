"""Gain tests: matched comparisons, the robust test, matched compute, intervals, error levels."""
