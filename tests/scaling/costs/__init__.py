"""Tests of scaling.costs: plan, seeds, naive cost, power, pilot and inference cost."""
