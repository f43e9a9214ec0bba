"""Tests of scaling.records: the study folder's files (their formats, readers and writers)."""
