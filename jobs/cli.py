"""`scaling train` (placeholder until the training job lands)."""


def train() -> None:
    """Train one run from a run-config file."""
    raise NotImplementedError("train is not implemented yet")
