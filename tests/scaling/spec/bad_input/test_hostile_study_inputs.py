"""Bad input, round three (issue 55): a YAML alias bomb, a binary file, a variant that cannot
build, an unreachable database store, a bad environment value. Each is one `error:` line naming
the file (or variable) and the fix, exit 2, before anything is written or submitted."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from scaling.cli import app
from tests.scaling.conftest import one_size_spec

TOKEN = "Tk-s3cret-55"  # planted in a tracking URI's query string; never printed
PASSWORD = "Pw-s3cret-55"


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _invoke(args: list[str], env: dict | None = None):
    return CliRunner().invoke(app, args, env=env)


def _one_error(result, *names: str) -> str:
    """Exit 2, one `error:` line naming each of `names`, no traceback, no secret."""
    out = result.output
    assert result.exit_code == 2, out
    assert result.exception is None or isinstance(result.exception, SystemExit), out
    assert "Traceback" not in out and TOKEN not in out and PASSWORD not in out, out
    (line,) = [x for x in out.splitlines() if x.startswith("error:")]
    for name in names:
        assert name in line, (name, line)
    return line


def _bomb(levels: int = 9) -> str:
    """A billion laughs: 9 aliases of 9 aliases ... of a list of 9 strings (9^10 values)."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    return "name: bomb\n" + "\n".join(lines) + "\n"


HOSTILE_FILES = {
    "alias bomb": (_bomb().encode(), "expand to over 100,000 values"),
    "alias in its own anchor": (b"name: x\nsizes: &s [*s]\n", "expand to over 100,000 values"),
    "deep brackets": (b"name: " + b"[" * 1200 + b"]" * 1200 + b"\n", "nest"),
    "brackets 70 deep": (b"name: " + b"[" * 70 + b"]" * 70 + b"\n", "nest over 64 levels"),
    "binary": (bytes(range(256)) * 4, "not a text file (byte 128 is not UTF-8)"),
    "latin-1 text": ("name: caf\u00e9\n".encode("latin-1"), "not a text file"),
}


@pytest.mark.parametrize("command", ["plan", "run", "train", "submit"])
@pytest.mark.parametrize("content", HOSTILE_FILES.values(), ids=HOSTILE_FILES.keys())
def test_an_unreadable_study_file_is_one_line(tmp_path, command, content):
    """Items 1 and 2: an alias bomb hung `plan` (its values walked 9^10 times); a binary file
    was a UnicodeDecodeError traceback in `plan`, `run` and `train`."""
    data, fragment = content
    path = tmp_path / "study.yaml"
    path.write_bytes(data)
    before = _files(tmp_path)
    args = [command, str(path)] + (["--no-check-environment"] if command == "plan" else [])
    line = _one_error(_invoke(args), str(path), fragment)
    assert "; " in line  # the fix follows the problem
    assert _files(tmp_path) == before


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def study(tmp_path, data_dir):
    """A valid one-size study in its own folder (store and outputs inside `tmp_path`)."""
    spec = one_size_spec(data_dir, tmp_path / "out", f"sqlite:///{tmp_path / 'm.db'}", 4)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path, spec


def _write(path: Path, spec: dict) -> None:
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def test_an_unreachable_database_store_is_one_line_in_run_and_analyze(study, tmp_path):
    """Item 4: `postgresql://` to a closed port was 100 s of SQLAlchemy retries and a traceback
    in `run` and `analyze`; `plan` did not warn. Item 17: a token in its query string is
    masked."""
    path, spec = study
    port = _closed_port()
    uri = f"postgresql+psycopg2://alice:{PASSWORD}@127.0.0.1:{port}/mlflow?password={TOKEN}"
    spec["mlflow"]["tracking_uri"] = uri
    _write(path, spec)
    before = _files(tmp_path)
    where = f"127.0.0.1:{port}"
    line = _one_error(_invoke(["run", str(path)]), str(path), "tracking_uri", where)
    assert "does not answer" in line
    _one_error(_invoke(["analyze", str(path)]), str(path), where, "does not answer")
    plan = _invoke(["plan", str(path)])
    assert plan.exit_code == 0, plan.output
    (warning,) = [x for x in plan.output.splitlines() if x.startswith("warning:")]
    assert where in warning and TOKEN not in plan.output and PASSWORD not in plan.output
    assert _files(tmp_path) == before


def test_a_reachable_store_with_a_wrong_login_is_one_line(study, tmp_path):
    """The shared PostgreSQL answers, but refuses this role: one line, the password masked."""
    import os

    dsn = os.environ.get("SCALING_TEST_PG_DSN")
    if not dsn:
        pytest.skip("no PostgreSQL service (source /tmp/svc/env)")
    from sqlalchemy.engine import make_url

    url = make_url(dsn).set(username="nobody-55", password=PASSWORD)
    path, spec = study
    spec["mlflow"]["tracking_uri"] = url.render_as_string(hide_password=False)
    _write(path, spec)
    line = _one_error(_invoke(["run", str(path)]), str(path), "did not accept a connection")
    assert "nobody-55" in line  # the driver's reason, the role it refused


def test_a_token_in_the_query_string_is_masked(study, tmp_path):
    """Item 17: an http URI whose query carries a token, refused as not answering."""
    path, spec = study
    port = _closed_port()
    spec["mlflow"]["tracking_uri"] = f"http://127.0.0.1:{port}/?token={TOKEN}&x=1"
    _write(path, spec)
    line = _one_error(_invoke(["run", str(path)]), str(path), "token=***")
    assert "x=1" in line


BAD_SETTINGS = {
    "SCALING_RENDEZVOUS_TIMEOUT_S": "abc",
    "SCALING_POLL_S": "-1",
    "SCALING_LOGIN_GIVE_UP_S": "nan",
    "SCALING_WARM_START": "off",
    "SCALING_INFERENCE_COST": "0",
}


@pytest.mark.parametrize("command", ["run", "submit", "pilot", "status --watch"])
@pytest.mark.parametrize(("name", "value"), BAD_SETTINGS.items(), ids=BAD_SETTINGS.keys())
def test_a_bad_documented_setting_is_refused_before_anything_starts(
    study, tmp_path, command, name, value
):
    """Item 5: `SCALING_RENDEZVOUS_TIMEOUT_S=abc` was read only inside each job, so every cell
    failed on it; every documented setting is read by the command first."""
    path, _ = study
    before = _files(tmp_path)
    result = _invoke([*command.split(), str(path)], env={name: value})
    line = _one_error(result, name, repr(value))
    assert "unset it" in line
    assert _files(tmp_path) == before


BROKEN = "tests.variants.broken:fails_to_build"


@pytest.mark.parametrize("command", ["run", "pilot"])
def test_run_and_pilot_refuse_a_variant_that_cannot_build(study, tmp_path, command):
    """Item 3: `run` trained a variant whose module has a shape bug (6 failed attempts, 118
    files); `pilot` probed it. Both now build each arm of the user's own first, as `plan` does,
    and the line names the study file and the variant's own file and line."""
    path, spec = study
    spec["variants"] = [BROKEN, "linear"]
    spec["verdict"] = {"baseline": "linear"}
    _write(path, spec)
    before = _files(tmp_path)
    broken = str(Path(__file__).resolve().parents[3] / "variants" / "broken.py")
    line = _one_error(_invoke([command, str(path)]), str(path), f"({broken})", f"{broken}:21")
    assert "building its model failed: RuntimeError" in line
    assert _files(tmp_path) == before
