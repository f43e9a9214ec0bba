"""Tests of scaling.spec: the study spec, its checks and its expansion into cells."""
