"""The training loop: `train(config)`, and its stop, pause and loss-spike rules."""
