"""The shipped studies as a user holds them, but in a folder of the test's own.

A shipped study's relative paths (`output_dir: ../runs/NAME`, its SQLite store, its prepared
data) resolve against the folder of the study file. Read in place, a test would see the
repository's `runs/NAME` (left by `scripts/demo.sh` or a user's study) and plan more cells than
the file alone gives. A copy at `ROOT/studies/NAME.yaml` keeps every relative path inside ROOT.
"""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STUDIES = REPO / "studies"
# The folders a user's runs write in the repository; no test reads or writes them.
USER_FOLDERS = ("runs", "data", "mlruns", "outputs", "results")


def shipped_study(name: str, root: Path) -> Path:
    """`studies/NAME.yaml` copied to `root/studies/NAME.yaml`; its relative paths stay in `root`."""
    target = Path(root) / "studies" / f"{name}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(STUDIES / f"{name}.yaml", target)
    return target


def shipped_names() -> list[str]:
    return sorted(p.stem for p in STUDIES.glob("*.yaml"))


def user_folders_snapshot(repo: Path = REPO) -> dict[str, tuple[int, int] | None]:
    """Every file under the repository's user folders with its (mtime_ns, size): what a run left."""
    seen: dict[str, tuple[int, int] | None] = {}
    for name in USER_FOLDERS:
        folder = repo / name
        seen[name] = None if not folder.exists() else (0, 0)
        if folder.is_dir():
            for path in folder.rglob("*"):
                try:
                    st = path.lstat()
                except FileNotFoundError:  # a user's study still writing there
                    continue
                seen[str(path.relative_to(repo))] = (st.st_mtime_ns, st.st_size)
    return seen
