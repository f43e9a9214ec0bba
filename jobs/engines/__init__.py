"""What computes a step: engines, optimiser and schedule, collectives, batches, device peak."""
