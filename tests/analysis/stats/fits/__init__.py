"""Tests of analysis.stats.fits."""
