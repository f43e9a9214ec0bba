"""Sequential seeds: alpha spending, a look's decision, the seeds it adds, replay, its cost."""
