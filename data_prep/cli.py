"""`scaling prepare-data` (placeholder until the data-preparation module lands)."""


def prepare_data() -> None:
    """Prepare a tokenised dataset."""
    raise NotImplementedError("prepare-data is not implemented yet")
