"""One study file is one study from any working directory; reading it creates no store.

Relative paths in a study resolve against the study file's folder (`foundation.studypaths`):
the loader and `scaling analyze` agree on them, and `status`, `plan`, `analyze` never create
the SQLite store the spec names. The end-to-end test runs the real CLI from two directories
against one tiny local study.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from analysis.tables.spec import study_source
from scaling.backends.slurm.parameters import slurm_parameters
from scaling.driver.environment import load_study_spec
from tests.scaling.conftest import one_size_spec

REPO = Path(__file__).resolve().parents[3]


def _relative_study(tmp_path: Path, data_dir: Path, **overrides) -> Path:
    """A one-cell study whose every path is relative: store, study folder and dataset."""
    folder = tmp_path / "mystudy"
    folder.mkdir(exist_ok=True)
    spec = one_size_spec(data_dir, Path("unused"), "sqlite:///runs/tiny/mlflow.db", steps=4)
    del spec["output_dir"]  # default: runs/NAME beside the study file
    spec.update(name="tiny", variants=["linear"], **overrides)
    spec["data"]["path"] = os.path.relpath(data_dir, folder)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_relative_paths_resolve_against_the_study_file_from_any_directory(
    tmp_path, data_dir, monkeypatch
):
    path = _relative_study(tmp_path, data_dir)
    folder = path.parent
    seen = []
    for cwd in (tmp_path, folder, data_dir):
        monkeypatch.chdir(cwd)
        study = load_study_spec(os.path.relpath(path, cwd), check_environment=False)
        uri, _, _, analysis = study_source(Path(os.path.relpath(path, cwd)))
        assert uri == study.mlflow.tracking_uri  # analyze reads the store the loader names
        assert analysis == study.folder / "analysis"
        seen.append((study.folder, study.mlflow.tracking_uri, study.spec.dataset_path))
    assert seen == [seen[0]] * 3
    assert seen[0] == (
        folder / "runs" / "tiny",
        f"sqlite:///{folder / 'runs' / 'tiny' / 'mlflow.db'}",
        data_dir,
    )


def test_python_path_is_relative_to_the_study_file_and_reaches_slurm_jobs(
    tmp_path, data_dir, monkeypatch
):
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))  # restored after
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "mystudy" / "src").mkdir(parents=True)
    path = _relative_study(tmp_path, data_dir, python_path="src")
    spec = yaml.safe_load(path.read_text())
    monkeypatch.chdir(tmp_path)
    study = load_study_spec(path, check_environment=False)
    src = str(tmp_path / "mystudy" / "src")
    assert study.spec.python_path == [src]
    assert sys.path[0] == src and os.environ["PYTHONPATH"].split(os.pathsep)[0] == src
    setup = slurm_parameters(study.spec, world_size=1)["setup"]
    assert f'export PYTHONPATH={src}"${{PYTHONPATH:+:$PYTHONPATH}}"' in setup

    path.write_text(yaml.safe_dump({**spec, "python_path": ["src", "nowhere"]}))
    with pytest.raises(ValueError, match=r"study.python_path\[1\]: .*nowhere is not a folder"):
        load_study_spec(path, check_environment=False)


def _cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scaling", *args],
        cwd=cwd,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _stores(root: Path) -> list[Path]:
    return sorted(root.rglob("*.db"))


@pytest.mark.slow
def test_status_and_run_from_two_directories_share_one_store_and_train_once(tmp_path, data_dir):
    path = _relative_study(tmp_path, data_dir)
    store = path.parent / "runs" / "tiny" / "mlflow.db"
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    from_here = os.path.relpath(path, here)

    # before anything ran: the read-only commands say where the store should be, create nothing
    status = _cli("status", from_here, cwd=here)
    plan = _cli("plan", from_here, "--no-check-environment", cwd=here)
    analyze = _cli("analyze", from_here, cwd=here)
    assert _stores(tmp_path) == [] and not list(here.iterdir())
    assert status.returncode == 0 and "1 pending" in status.stdout, status.stderr[-3000:]
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert analyze.returncode == 2
    for proc in (status, plan, analyze):
        assert f"study folder: {path.parent / 'runs' / 'tiny'}" in proc.stdout
        assert f"no MLflow store at {store}" in proc.stderr

    first = _cli("run", str(path), "--no-analyze", cwd=there)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert _stores(tmp_path) == [store]
    run_ids = {p.read_text() for p in (path.parent / "runs").rglob("mlflow_run_id")}
    assert len(run_ids) == 1

    status = _cli("status", from_here, cwd=here)
    assert status.returncode == 0 and "1 completed" in status.stdout, status.stdout
    again = _cli("run", from_here, "--no-analyze", cwd=here)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "1 cells, 1 already done" in again.stdout  # nothing retrained
    assert {p.read_text() for p in (path.parent / "runs").rglob("mlflow_run_id")} == run_ids
    assert _stores(tmp_path) == [store]
    assert not list(here.iterdir()) and not list(there.iterdir())  # nothing where it ran
    assert f"study folder: {path.parent / 'runs' / 'tiny'}" in again.stdout
