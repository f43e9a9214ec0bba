"""Planning seeds: the power planner and what a sequential design costs."""
