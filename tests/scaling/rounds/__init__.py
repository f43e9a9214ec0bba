"""Tests of scaling.rounds: the round driver, the executors, the LR search, the looks, run."""
