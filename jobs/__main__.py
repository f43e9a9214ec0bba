"""`python -m jobs RUN_CONFIG`: the same as `scaling train RUN_CONFIG`."""

import typer

from jobs.cli import train

if __name__ == "__main__":
    typer.run(train)
