"""Issue 63: prepare-data replaces only what it made, and a write fault is one line, not a loss.

`--force` used to delete whatever folder `-o` named (the source corpus included); an `-o` file
survived only as a hidden `.NAME.old-PID`; `-o` below a file, a full disk and a file-size limit
ended in tracebacks. Each refusal here must come before anything is read or written and leave
every byte the user had.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from data_prep import DataPrepConfig, load_manifest, preparation, prepare
from data_prep.cli import prepare_data
from data_prep.output import OutputWriteError

REPO = Path(__file__).resolve().parents[2]


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with its bytes (None for a folder): what must survive."""
    return {
        str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
        for p in sorted(folder.rglob("*"))
    }


def _corpus(folder: Path, count: int = 30) -> Path:
    """A small local source of .txt documents (each one document)."""
    folder.mkdir(parents=True)
    text = (REPO / "data_prep" / "preparation.py").read_text()
    for i in range(count):
        (folder / f"doc{i:02d}.txt").write_text(f"# document {i}\n{text}")
    return folder


def _config(source: Path, out: Path, **changes) -> DataPrepConfig:
    return DataPrepConfig(
        source=str(source),
        output_dir=str(out),
        vocab_size=300,
        validation_fraction=0.3,
        **changes,
    )


def _nothing_read(monkeypatch) -> None:
    """Fail the test if prepare opens the source: refusals come before anything is read."""

    def read(*_args, **_kwargs):
        raise AssertionError("the source was opened before the output was refused")

    monkeypatch.setattr(preparation, "open_source", read)


def _cli(*args: str) -> tuple[int, list[str]]:
    """`prepare-data` in-process: exit code and its `error:` lines (one line each, unwrapped)."""
    app = typer.Typer()
    app.command("prepare-data")(prepare_data)
    app.command("unused")(lambda: None)  # two commands, so `prepare-data` is addressed by name
    result = CliRunner().invoke(app, ["prepare-data", *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, [x for x in result.output.splitlines() if x.startswith("error:")]


@pytest.mark.parametrize("where", ["is", "inside", "holds"])
def test_force_never_writes_over_the_source(tmp_path, monkeypatch, where):
    """`--source DIR -o DIR --force` replaced the corpus with the dataset (exit 0)."""
    src = _corpus(tmp_path / "corpus", count=3)
    out = {"is": src, "inside": src / "out", "holds": tmp_path}[where]
    before = _snapshot(tmp_path)
    _nothing_read(monkeypatch)
    with pytest.raises(ValueError) as err:
        prepare(_config(src, out), force=True)
    message = str(err.value)
    assert f"{out} " in message and f"the source {src}" in message, message
    assert "--force" not in message and "choose another -o" in message
    assert _snapshot(tmp_path) == before


def test_force_refuses_a_folder_it_did_not_make(tmp_path, monkeypatch):
    """`-o ~/mywork --force` deleted the user's folder; the refusal even suggested --force."""
    src = _corpus(tmp_path / "corpus", count=3)
    mywork = tmp_path / "mywork"
    (mywork / "sub").mkdir(parents=True)
    (mywork / "thesis.tex").write_text("years of work\n")
    (mywork / "sub" / "data.jsonl").write_text('{"text": "x"}\n')
    before = _snapshot(tmp_path)
    _nothing_read(monkeypatch)
    for force in (True, False):
        with pytest.raises(ValueError) as err:
            prepare(_config(src, mywork), force=force)
        message = str(err.value)
        assert f"{mywork} already holds files that prepare-data did not write" in message
        assert "remove it yourself" in message and "--force" not in message, message
        assert _snapshot(tmp_path) == before
    code, errors = _cli("--source", str(src), "-o", str(mywork), "--force")
    assert code == 2 and len(errors) == 1 and "--force" not in errors[0], errors
    assert _snapshot(tmp_path) == before


def test_force_refuses_a_file_and_leaves_it_in_place(tmp_path, monkeypatch):
    """An `-o` file with --force survived only as a hidden `.NAME.old-PID`."""
    src = _corpus(tmp_path / "corpus", count=3)
    target = tmp_path / "results.csv"
    target.write_bytes(b"step,loss\n1,2.5\n")
    before = _snapshot(tmp_path)
    _nothing_read(monkeypatch)
    with pytest.raises(ValueError, match=r"results.csv is a file, not a folder prepare-data made"):
        prepare(_config(src, target), force=True)
    assert _snapshot(tmp_path) == before


def test_output_below_a_file_is_one_line(tmp_path):
    """`-o FILE/sub` ended in a NotADirectoryError/FileExistsError traceback."""
    src = _corpus(tmp_path / "corpus", count=3)
    (tmp_path / "notes.txt").write_text("mine\n")
    before = _snapshot(tmp_path)
    code, errors = _cli("--source", str(src), "-o", str(tmp_path / "notes.txt" / "sub"))
    assert code == 2, errors
    (line,) = errors
    assert f"lies below {tmp_path / 'notes.txt'}, which is a file" in line, line
    assert _snapshot(tmp_path) == before


def test_force_replaces_only_its_own_dataset(tmp_path):
    """What --force still does: rebuild a dataset it made, fill an empty folder; and what it
    will not: drop a file the user put inside a dataset."""
    src = _corpus(tmp_path / "corpus")
    empty = tmp_path / "empty"
    empty.mkdir()
    first = prepare(_config(src, empty))  # an empty folder is filled, no --force needed
    assert prepare(_config(src, empty, split_seed=7), force=True)["config"]["split_seed"] == 7
    (empty / "README.md").write_text("my notes on this dataset\n")
    before = _snapshot(tmp_path)
    with pytest.raises(ValueError) as err:
        prepare(_config(src, empty), force=True)
    assert "also holds 'README.md', which prepare-data did not write" in str(err.value)
    with pytest.raises(ValueError) as err:  # settings changed: not rebuilt there, no --force hint
        prepare(_config(src, empty, split_seed=first["config"]["split_seed"]))
    assert "will not rebuild it there" in str(err.value) and "--force" not in str(err.value)
    assert _snapshot(tmp_path) == before
    assert prepare(_config(src, empty, split_seed=7))["config"]["split_seed"] == 7  # reused


def _no_temp_or_lock(parent: Path, name: str) -> None:
    leftovers = [p.name for p in parent.iterdir() if p.name.startswith(f".{name}.")]
    assert leftovers in ([], [f".{name}.lock"]), leftovers


@pytest.mark.parametrize(
    "limit, file",
    [(4_000, "tokenizer.json"), (100_000, "train.bin")],  # the tokenizer is ~8 kB, train.bin ~500
)
def test_file_size_limit_is_one_line_and_keeps_the_old_dataset(tmp_path, limit, file):
    """`ulimit -f` (RLIMIT_FSIZE; Python ignores SIGXFSZ, so writes fail with EFBIG) ended in
    a traceback. A real limit in a child process; the dataset --force was to replace stays."""
    src = _corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    prepare(_config(src, out))
    before = _snapshot(out)

    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    args = ["--source", str(src), "-o", str(out), "--vocab-size", "300"]
    args += ["--validation-fraction", "0.3", "--split-seed", "7", "--force"]
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", "prepare-data", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        # a terminal narrower than the line: it is still one line (typer.echo never wraps)
        env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "30", "TERM": "dumb"},
        preexec_fn=limit_file_size,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert f"/{file} failed: the file outgrew this process's file-size limit" in line, line
    assert _snapshot(out) == before
    _no_temp_or_lock(tmp_path, "out")


def test_full_disk_is_an_output_write_error_and_leaves_nothing(tmp_path, monkeypatch):
    """ENOSPC at the point the writer writes the token file (megatron's builder)."""
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    def disk_full(self, *_args, **_kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(IndexedDatasetBuilder, "add_document", disk_full)
    src = _corpus(tmp_path / "corpus", count=3)
    before = _snapshot(tmp_path)
    out = tmp_path / "new" / "out"
    with pytest.raises(OutputWriteError) as err:
        prepare(_config(src, out))
    assert err.value.errno == errno.ENOSPC
    assert ".out.tmp-" in err.value.strerror and "the disk is full" in err.value.strerror
    assert "removed its partial output" in err.value.strerror
    assert _snapshot(tmp_path) == before  # no folder, temp or lock left
    with pytest.raises(ValueError, match="no such prepared dataset"):
        load_manifest(out)
