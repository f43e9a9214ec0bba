"""Property-based fuzzing of the inputs a hostile user controls beside the study's fields (issue
55): the study file's bytes (alias bombs, an alias inside its own anchor, brackets nested deep,
bytes that are not UTF-8), a run table's cells (non-finite, negative, zero, empty, repeated
rows, a header only) and the environment variables the docs name.

Each case runs in this process (no subprocess per case) and must end in one `error:` line
naming the file or variable, exit 2, nothing written; a run table either loads with every
count finite and positive, every loss positive or missing and every run once, or is refused
naming the file and the column and row (or the two rows). Deterministic (`derandomize`, no
example database); 550 cases, all in this process.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from typer.testing import CliRunner

from analysis.synthetic.studies import Effect, make_study
from analysis.tables.runs import load_csv
from foundation.config import ConfigError
from jobs.config import load_run_config
from scaling.cli import app
from scaling.cli.terminal import check_driver_settings
from scaling.spec.loader import read_study

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "hypothesis-scaling-tests")
STUDIES = Path(__file__).resolve().parents[4] / "studies"
QUICK = (STUDIES / "quick.yaml").read_bytes()
CASES = itertools.count()
SETTINGS = dict(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _one_error(result, *names: str) -> str:
    out = result.output
    assert "Traceback" not in out, out
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(repr(result.exception)) from result.exception
    assert result.exit_code == 2, out
    (line,) = [x for x in out.splitlines() if x.startswith("error:")]
    for name in names:
        assert name in line, (name, line)
    return line


# --- the study file's bytes ----------------------------------------------------------------------


@st.composite
def alias_bomb(draw) -> bytes:
    """Anchors of `width` aliases of the anchor before, `depth` deep: width^depth values."""
    width, depth = draw(st.integers(2, 12)), draw(st.integers(2, 10))
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, depth):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    flow = draw(st.booleans())  # a block mapping of aliases, or one flow line
    if flow:
        lines.append(f"top: {{{', '.join(f'k{j}: *a{depth - 1}' for j in range(width))}}}")
    return ("name: bomb\n" + "\n".join(lines) + "\n").encode()


@st.composite
def self_alias(draw) -> bytes:
    kind = draw(st.sampled_from(["&s [*s]", "&s {a: *s}", "&s [1, [2, *s]]"]))
    return f"name: x\nsizes: {kind}\n".encode()


@st.composite
def deep_nesting(draw) -> bytes:
    depth = draw(st.integers(65, 200))
    opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
    return b"name: " + (opener * depth + "1" + closer * depth).encode() + b"\n"


@st.composite
def not_utf8(draw) -> bytes:
    """The shipped quick study with bytes that are not UTF-8 put in, or random binary."""
    if draw(st.booleans()):
        return draw(st.binary(min_size=1, max_size=400)).replace(b"\xff", b"") + b"\xff\xfe"
    at = draw(st.integers(0, len(QUICK)))
    bad = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xe9", b"\x80\x80", b"\xed\xa0\x80"]))
    return QUICK[:at] + bad + QUICK[at:]


HOSTILE_BYTES = st.one_of(alias_bomb(), self_alias(), deep_nesting(), not_utf8())


def test_hostile_study_files_are_one_line(tmp_path) -> None:
    """200 files, each refused naming the file: most by the loader every command calls first
    (`read_study`: `plan`, `run`, `submit`; `load_run_config`: `train`), one in five by `plan`
    or `run` themselves (one `error:` line, exit 2)."""
    seen = {"cases": 0}

    @settings(max_examples=200, **SETTINGS)
    @given(data=HOSTILE_BYTES, how=st.sampled_from(["study", "study", "run config", "cli"]))
    def one_case(data: bytes, how: str) -> None:
        case = tmp_path / f"case{next(CASES)}"
        case.mkdir()
        path = case / "study.yaml"
        path.write_bytes(data)
        before = _files(case)
        if how == "cli":
            command = ["plan", "--no-check-environment"] if len(data) % 2 else ["run"]
            _one_error(CliRunner().invoke(app, [*command, str(path)]), str(path))
        else:
            with pytest.raises(ConfigError) as err:
                (read_study if how == "study" else load_run_config)(path)
            assert all(p.startswith(f"{path}: ") for p in err.value.problems), err.value
        assert _files(case) == before
        seen["cases"] += 1

    one_case()
    assert seen["cases"] == 200, seen


# --- a run table's cells -------------------------------------------------------------------------

TABLE = make_study({"linear": Effect(), "nonlinear": Effect(k0=1.5)}, (2e6, 5e6, 1e7), 2)
NUMERIC = ["num_nonembedding_params", "tokens", "flops", "lr", "seed", "final_val_loss"]
VALUES = [math.inf, -math.inf, math.nan, -1.0, 0.0, -1e-300, 1e308, 1e-300, "", "x", "1e999"]


@st.composite
def hostile_table(draw) -> pd.DataFrame:
    frame = TABLE.copy().astype({c: object for c in NUMERIC})
    for _ in range(draw(st.integers(0, 3))):
        how = draw(st.sampled_from(["cell", "cell", "cell", "repeat", "empty", "drop"]))
        if how == "cell" and len(frame):
            row, col = draw(st.integers(0, len(frame) - 1)), draw(st.sampled_from(NUMERIC))
            frame.iloc[row, frame.columns.get_loc(col)] = draw(st.sampled_from(VALUES))
        elif how == "repeat" and len(frame):
            frame = pd.concat([frame, frame.iloc[[draw(st.integers(0, len(frame) - 1))]]])
        elif how == "empty":
            frame = frame.iloc[:0]
        elif len(frame) > 1:
            frame = frame.drop(index=frame.index[draw(st.integers(0, len(frame) - 1))])
    if draw(st.booleans()):  # a table without run ids: runs are told apart by their cell
        frame = frame.drop(columns="run_id")
    return frame


def _sound(table: pd.DataFrame) -> None:
    """What a loaded table promises every fit downstream."""
    assert len(table) > 0
    for col in ("num_nonembedding_params", "tokens", "flops"):
        assert np.isfinite(table[col]).all() and (table[col] > 0).all(), col
    lr = table["lr"].dropna()
    assert np.isfinite(lr).all() and (lr > 0).all()
    loss = table["final_val_loss"]
    assert not (np.isfinite(loss) & (loss <= 0)).any()
    assert not table.duplicated(subset=["variant", "size", "tokens", "seed", "lr"]).any()


def test_hostile_run_tables_load_soundly_or_fail_in_one_line(tmp_path) -> None:
    """200 tables: each loads soundly or is refused naming the file and where in it."""
    counts = {"loaded": 0, "refused": 0}

    @settings(max_examples=200, **SETTINGS)
    @given(frame=hostile_table())
    def one_case(frame: pd.DataFrame) -> None:
        path = tmp_path / f"runs{next(CASES)}.csv"
        frame.to_csv(path, index=False)
        try:
            table = load_csv(path)
        except ValueError as err:
            message = str(err)
            assert "\n" not in message and message.startswith(f"--runs-csv {path}: "), message
            where = ("column '", "rows ", "no runs to analyse", "no run ")
            assert any(w in message for w in where), message
            counts["refused"] += 1
            return
        _sound(table)
        counts["loaded"] += 1

    one_case()
    assert counts["refused"] >= 50 and counts["loaded"] >= 10, counts


# --- the environment variables the docs name ----------------------------------------------------

SECONDS = {  # name: (must be > 0, or >= 0)
    "SCALING_RENDEZVOUS_TIMEOUT_S": True,
    "SCALING_POLL_S": True,
    "SCALING_LOGIN_GIVE_UP_S": False,
}
SWITCHES = {"SCALING_WARM_START": ("0", "1"), "SCALING_INFERENCE_COST": ("on", "off")}
HOSTILE_VALUES = st.one_of(
    st.sampled_from(["abc", "nan", "inf", "-inf", "-1", "0", "-0", "1e999", "1e-9", "  ", " 7 "]),
    st.sampled_from(["0", "1", "on", "off", "OFF", "true", "yes", "2", "0.5", "300"]),
    st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12),
)


def _valid(name: str, value: str) -> bool:
    """The oracle, written apart from the code: what each documented variable accepts."""
    raw = value.strip()
    if not raw:
        return True  # unset in effect: the default
    if name in SWITCHES:
        return raw in SWITCHES[name]
    try:
        number = float(raw)
    except ValueError:
        return False
    return 0 < number < math.inf if SECONDS[name] else number >= 0


@contextlib.contextmanager
def _env(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def test_hostile_environment_values_are_refused_before_the_study_is_read(tmp_path) -> None:
    """150 values through the check `run`, `submit` and `pilot` make before reading the study
    (`check_driver_settings`): a bad one is one `error:` line naming the variable and exit 2;
    a good one passes. One in five goes through `run` itself."""
    counts = {"refused": 0, "accepted": 0}
    missing = tmp_path / "no-such-study.yaml"

    @settings(max_examples=150, **SETTINGS)
    @given(name=st.sampled_from([*SECONDS, *SWITCHES]), value=HOSTILE_VALUES, cli=st.integers(0, 4))
    def one_case(name: str, value: str, cli: int) -> None:
        stderr = io.StringIO()
        with _env(name, value):
            if cli == 0:  # `run` itself: past the settings, the missing study is refused
                result = CliRunner().invoke(app, ["run", str(missing)])
                line = _one_error(result, name if not _valid(name, value) else str(missing))
            else:
                with contextlib.redirect_stderr(stderr):
                    try:
                        check_driver_settings()
                        code = 0
                    except typer.Exit as exit_:
                        code = exit_.exit_code
                lines = stderr.getvalue().splitlines()
                assert code == (0 if _valid(name, value) else 2), (name, value, lines)
                line = lines[0] if lines else ""
                assert len(lines) == (0 if code == 0 else 1), lines
        if _valid(name, value):
            assert name not in line, line
            counts["accepted"] += 1
        else:
            assert line.startswith(f"error: {name}=") and "unset it" in line, line
            counts["refused"] += 1

    one_case()
    assert counts["refused"] >= 50 and counts["accepted"] >= 10, counts
    assert _files(tmp_path) == set()


@pytest.fixture(autouse=True)
def _no_stray_settings(monkeypatch):
    """The suite's own settings (a poll of 1 s ...) stay; none of the fuzzed names leaks in."""
    for name in [*SECONDS, *SWITCHES]:
        if name not in ("SCALING_POLL_S",):
            monkeypatch.delenv(name, raising=False)
