"""A fake Slurm client first on PATH: shell scripts named `sinfo`, `scontrol`, ... (or given
raw bytes, e.g. a shebang to an interpreter that does not exist), for the tests that feed the
code what a broken or odd site's tools print."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from tests.scaling.conftest import one_size_spec

# a cluster with accounting, MaxArraySize 4 and nothing queued; each test replaces some
TOOLS = {
    "sinfo": 'echo "debug*"',
    "scontrol": 'printf "AccountingStorageType   = accounting_storage/slurmdbd\\n'
    'MaxArraySize            = 4\\nMaxJobCount             = 10000\\n"',
    "sacctmgr": 'case "$*" in\n'
    '  *"show assoc"*) echo "acct0|normal|normal|6||" ;;\n'
    '  *"show qos"*) echo "normal|||" ;;\n'
    "esac",
    "sbatch": 'echo "$@" >> "$(dirname "$0")/sbatch_calls"; echo 123',
    "squeue": 'echo "$@" >> "$(dirname "$0")/squeue_calls"',
}


SLURM_CLIENT = {*TOOLS, "scancel", "sacct", "srun", "salloc", "sbcast", "sattach", "sstat"}


def fake_slurm(tmp_path: Path, monkeypatch, **tools: str | bytes) -> Path:
    """Put `TOOLS`, with `tools` replacing some (a str: a /bin/sh body; bytes: the whole file),
    in a folder first on PATH; returns it (`sbatch_calls`, `squeue_calls` appear there once
    called)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {**TOOLS, **tools}.items():
        tool = bin_dir / name
        if isinstance(body, bytes):
            tool.write_bytes(body)
        else:
            tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), *_without_slurm(tmp_path)]))
    return bin_dir


def _without_slurm(tmp_path: Path) -> list[str]:
    """PATH's folders, each holding a Slurm client replaced by links to all else it holds: a
    fake that cannot be executed must not fall through to the real tool (as exec does for a
    missing interpreter, ENOENT)."""
    folders = []
    for i, folder in enumerate(os.environ["PATH"].split(os.pathsep)):
        if not any((Path(folder) / name).exists() for name in SLURM_CLIENT):
            folders.append(folder)
            continue
        links = tmp_path / f"path{i}"
        links.mkdir()
        for entry in Path(folder).iterdir():
            if entry.name not in SLURM_CLIENT:
                (links / entry.name).symlink_to(entry)
        folders.append(str(links))
    return folders


def slurm_study(tmp_path: Path, data_dir: Path, mlflow_server: str) -> Path:
    """A one-size study of two 4-step cells on Slurm, written to `tmp_path/study.yaml`."""
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, 4, executor="slurm")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path
