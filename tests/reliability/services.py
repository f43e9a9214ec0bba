"""Private service instances the fault tests may kill: PostgreSQL and an MLflow server on it.

The shared server that .ci/run starts serves every other test, so a test that restarts a server
or a database starts its own here (scripts/postgres.sh, the same script CI uses) on free
loopback ports, and stops it afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO, start_mlflow_server
from tests.distributed import free_port

POSTGRES_SH = REPO / "scripts" / "postgres.sh"


def postgres_available() -> tuple[bool, str]:
    """PostgreSQL binaries present, or installable (root and apt)."""
    if list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        return True, ""
    if os.geteuid() == 0 and Path("/usr/bin/apt-get").exists():
        return True, ""
    return False, "no PostgreSQL under /usr/lib/postgresql and no root+apt to install it"


def _postgres(action: str, root: Path, *extra: str) -> str:
    out = subprocess.run(
        ["bash", str(POSTGRES_SH), action, str(root), *extra],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out.stdout


@dataclass
class Postgres:
    """A PostgreSQL server in `root` (data, socket, log), on 127.0.0.1:`port`."""

    root: Path
    port: int = field(default_factory=free_port)

    @property
    def dsn(self) -> str:
        # +psycopg2: SQLAlchemy 2.1 would otherwise pick psycopg 3, which is not installed
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/mlflow"

    def start(self) -> Postgres:
        _postgres("start", self.root, str(self.port))
        return self

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every open connection is cut, as in a database failover."""
        _postgres("restart", self.root)

    def stop(self) -> None:
        _postgres("stop", self.root)


@dataclass
class MlflowServer:
    """An MLflow server on a fixed port, so that a restart comes back at the same URI."""

    root: Path
    backend_uri: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    uri: str = ""

    def start(self) -> MlflowServer:
        self.proc, self.uri = start_mlflow_server(self.root, self.port, self.backend_uri)
        return self

    def kill(self) -> None:
        """SIGKILL the whole server (uvicorn and its workers run in their own session)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def restart(self) -> None:
        self.kill()
        self.start()
