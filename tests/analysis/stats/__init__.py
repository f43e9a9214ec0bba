"""Tests of analysis.stats: the whole analysis on synthetic studies, by sub-package below."""
