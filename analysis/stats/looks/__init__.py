"""Sequential seeds: alpha spending, a look's decision, the seeds it adds, a design's replay."""
