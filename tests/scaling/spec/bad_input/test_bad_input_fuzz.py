"""Property-based fuzzing of the study loader: every mutation of a shipped study either loads
or ends in one `error:` line naming the file and a field, exit 2, nothing written, no secret.

Each case mutates one of `studies/*.yaml` (copied into its own folder, so the study's relative
paths stay inside it) by key (deleted, misspelt, repeated), type, value (zero, negative,
non-finite, huge, empty, over-long) or YAML structure (cut short, a stray tab, bracket or
colon, a line indented wrongly or repeated), then runs `scaling plan --no-check-environment`
in-process. A mutation that happens to leave a valid study (a seed changed to another seed, a
key removed that has a default) must load and plan: it is counted as `accepted`. Anything else
must be refused the way a user error is; an exception of any other kind fails the test with
the mutation that caused it. Deterministic (`derandomize`, no example database).
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from typer.testing import CliRunner

from scaling.cli import app

# Hypothesis caches what it learns (examples, constants) under ./.hypothesis; nothing of it
# belongs in the repository, and a derandomized run needs none of it
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "hypothesis-scaling-tests")
STUDIES = Path(__file__).resolve().parents[4] / "studies"
TEXTS = {p.name: p.read_text() for p in sorted(STUDIES.glob("*.yaml"))}
PARSED = {name: yaml.safe_load(text) for name, text in TEXTS.items()}
PASSWORD = "Fz-s3cret-pw"  # planted in tracking URIs (only there: a secret); never printed
NUM_CASES = 600
RESULTS: Counter = Counter()
CASE_NUMBERS = itertools.count()

NUMBERS = [0, -1, 0.0, -0.5, math.inf, -math.inf, math.nan, 1e300, 10**30, 1e-30, 7]
STRINGS = ["", " ", "x" * 300, "../" * 8, "a/b", "~", "huge", "0", "null", "yes", "1e3"]
URIS = [
    f"HTTP://alice:{PASSWORD}@127.0.0.1:9/",
    f"htp://alice:{PASSWORD}@127.0.0.1:9/",
    f"htp//alice:{PASSWORD}@127.0.0.1:9",
    f"http://alice:{PASSWORD}@",
    f"alice:{PASSWORD}@127.0.0.1",
    f"sqlite://alice:{PASSWORD}@x/y.db",
    f"ftp://alice:{PASSWORD}@host/",
]
ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(NUMBERS),
    st.sampled_from(STRINGS),
    st.lists(st.sampled_from([0, "x", 1.5, None]), max_size=3),
    st.dictionaries(st.sampled_from(["a", "30K", "*"]), st.sampled_from([0, "x", []]), max_size=2),
)


def _paths(node, prefix: tuple = ()) -> list[tuple]:
    """Every key and list index below `node`, as paths from the top."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    out = []
    for key, value in items:
        out.append((*prefix, key))
        if isinstance(value, dict | list) and value:
            out.extend(_paths(value, (*prefix, key)))
    return out


def _parent(data, path: tuple):
    for key in path[:-1]:
        data = data[key]
    return data


def _value_like(draw, old):
    """A value of the old one's kind that is likely wrong: zero, negative, non-finite, huge,
    empty, over-long, a list with a repeat or a bad item."""
    if isinstance(old, bool):
        return draw(st.sampled_from([not old, "maybe", 2]))
    if isinstance(old, int | float):
        return draw(st.sampled_from(NUMBERS))
    if isinstance(old, str):
        return draw(st.sampled_from(STRINGS))
    if isinstance(old, list):
        return draw(st.sampled_from([[], old + old[:1], [*old, None], [*old, "x"]]))
    return draw(st.sampled_from([{}, {"*": None}, {"unknown_key": 1}]))


def _data_mutation(draw, data: dict) -> str:
    path = draw(st.sampled_from(_paths(data)))
    parent, key = _parent(data, path), path[-1]
    how = draw(st.sampled_from(["delete", "rename", "type", "value", "uri"]))
    if how == "delete":
        del parent[key]
    elif how == "rename" and isinstance(parent, dict):
        parent[f"{key}{draw(st.sampled_from(['s', '_', 'X']))}"] = parent.pop(key)
    elif how == "type":
        parent[key] = draw(ANY_VALUE)
    elif how == "uri":
        data.setdefault("mlflow", {})
        if isinstance(data["mlflow"], dict):
            data["mlflow"]["tracking_uri"] = draw(st.sampled_from([*URIS, URIS[:2]]))
    else:
        parent[key] = _value_like(draw, parent[key])
    return f"{how} {'.'.join(map(str, path))}"


def _text_mutation(draw, text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    i = draw(st.integers(0, len(lines) - 1))
    how = draw(
        st.sampled_from(["cut", "tab", "bracket", "colon", "indent", "repeat", "uri", "dedent"])
    )
    line = lines[i]
    if how == "cut":
        return text[: draw(st.integers(0, len(text)))], how
    if how == "tab":
        lines[i] = "\t" + line
    elif how == "bracket":
        lines[i] = line.rstrip("\n") + " [\n"
    elif how == "colon":
        lines[i] = line.replace(":", "", 1)
    elif how == "indent":
        lines[i] = " " + line
    elif how == "dedent":
        lines[i] = line.lstrip(" ")
    elif how == "repeat":
        lines.insert(i, line)
    else:  # a quoted URI with a password left open: the parser error is at that line
        lines[i] = f"  tracking_uri: '{URIS[0]}\n"
    return "".join(lines), f"{how} line {i + 1}"


@st.composite
def mutated_study(draw) -> tuple[str, str, str]:
    """(study file name, mutated text, what was done)."""
    name = draw(st.sampled_from(sorted(TEXTS)))
    if draw(st.booleans()):
        data = copy.deepcopy(PARSED[name])
        what = _data_mutation(draw, data)
        return name, yaml.safe_dump(data, sort_keys=False), what
    text, what = _text_mutation(draw, TEXTS[name])
    return name, text, what


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


_FIELD_OR_LINE = re.compile(r"study\b|line \d+|\.yaml: ")


def _check_case(root: Path, name: str, text: str, what: str) -> None:
    case = root / f"case{next(CASE_NUMBERS)}"
    (case / "studies").mkdir(parents=True)
    path = case / "studies" / name
    path.write_text(text)
    before = _files(case)
    result = CliRunner().invoke(app, ["plan", "--no-check-environment", str(path)])
    out = result.output
    assert "Traceback" not in out, (what, out)
    assert PASSWORD not in out, (what, out)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{what}: {result.exception!r}") from result.exception
    assert _files(case) == before, (what, _files(case) - before)  # nothing written
    if result.exit_code == 0:
        RESULTS["accepted"] += 1
        return
    assert result.exit_code == 2, (what, result.exit_code, out)
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, (what, out)
    problems = out[out.index("error:") :].splitlines()
    for line in problems:  # each problem line names the file and a field or a line of it
        assert str(path) in line and _FIELD_OR_LINE.search(line), (what, line)
    RESULTS["refused"] += 1


@pytest.mark.slow  # ~20-45 s on 2 busy cores: 600 cases x one in-process `plan` each
def test_mutated_shipped_studies_load_or_fail_in_one_line(tmp_path) -> None:
    RESULTS.clear()

    @settings(
        max_examples=NUM_CASES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(case=mutated_study())
    def one_case(case: tuple[str, str, str]) -> None:
        _check_case(tmp_path, *case)

    one_case()
    print(f"fuzz cases: {dict(RESULTS)}")
    assert sum(RESULTS.values()) >= 500, RESULTS
    assert RESULTS["refused"] > 0 and RESULTS["accepted"] > 0, RESULTS
