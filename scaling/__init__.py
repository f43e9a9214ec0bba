"""Scaling studies of attention-query variants: study specs, orchestration and the `scaling` CLI."""
