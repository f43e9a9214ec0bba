"""Planning seeds: the power planner (the smallest gain a design detects, the seeds it needs)."""
