"""Tests of the LR search's and the looks' rounds: scaling.rounds.refine, transfer, looks."""
