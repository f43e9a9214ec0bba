"""Tests of scaling.state.files: the study folder's files (their formats, readers and writers)."""
