"""Study commands (placeholders until orchestration lands)."""


def plan() -> None:
    """Print a study's cells and cost."""
    raise NotImplementedError


def submit() -> None:
    """Submit a study's unfinished cells."""
    raise NotImplementedError


def status() -> None:
    """Show a study's grid."""
    raise NotImplementedError


def cancel() -> None:
    """Cancel a study's jobs."""
    raise NotImplementedError


def run() -> None:
    """Prepare, submit, wait, analyze."""
    raise NotImplementedError
