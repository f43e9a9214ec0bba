"""`scaling analyze` (placeholder until the analysis lands)."""


def analyze() -> None:
    """Analyse a study."""
    raise NotImplementedError("analyze is not implemented yet")
