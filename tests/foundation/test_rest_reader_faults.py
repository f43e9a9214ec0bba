"""`foundation.mlflow_rest` against a tracking server that misbehaves (issue 63, round four):
glitches are retried, what outlasts the retries is one line naming the server, a refusal is
not retried, a login in the URI is sent and never shown, a trickled answer is given up on."""

from __future__ import annotations

import pytest

from foundation import mlflow_rest
from foundation.config import ConfigError
from foundation.mlflow_rest import TrackingError, TrackingUnavailable, experiment_id, search_runs
from tests.foundation.fake_tracking import FakeTracking, Script, make_run

PASSWORD = "pw-NOT-SHOWN-63"


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv(mlflow_rest.BACKOFF_ENV, "0")
    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    server = FakeTracking()
    yield server
    server.close()


def _runs(num: int) -> list[dict]:
    return [make_run(i) for i in range(num)]


def test_glitches_are_retried_and_the_answer_used(fake) -> None:
    """A 500, a body cut short, an HTML page: three faults, then the whole answer."""
    runs = _runs(3)
    fake.script = Script(runs=list(runs), faults={0: ("status", 500), 1: ("cut",), 2: ("html",)})
    assert search_runs(fake.uri, "7", "") == runs
    assert [what for _, what in fake.script.log] == ["status", "cut", "html", "ok"]


@pytest.mark.parametrize("fault", [("status", 500), ("cut_json",), ("html",), ("drop",)])
def test_what_outlasts_the_retries_is_one_line_naming_the_server(fake, fault) -> None:
    """Never a JSON error (a ValueError: `scaling run` would call it an inconclusive analysis)
    and never a traceback's worth of text: one line with the server and the fix."""
    fake.script = Script(runs=_runs(2), faults=dict.fromkeys(range(10), fault))
    with pytest.raises(TrackingUnavailable) as raised:
        search_runs(fake.uri, "7", "")
    message = str(raised.value)
    assert not isinstance(raised.value, ValueError)
    assert "\n" not in message and fake.uri in message and "run the command again" in message
    assert len(fake.script.log) == mlflow_rest.RETRIES + 1


def test_a_refusal_is_not_retried(fake) -> None:
    fake.script = Script(runs=_runs(2), faults={0: ("status", 403)})
    with pytest.raises(TrackingError) as raised:
        search_runs(fake.uri, "7", "")
    assert not isinstance(raised.value, TrackingUnavailable)
    assert "HTTP 403" in str(raised.value) and len(fake.script.log) == 1


def test_a_login_in_the_uri_is_sent_as_basic_auth_and_never_shown(fake) -> None:
    uri = fake.uri.replace("http://", f"http://alice:{PASSWORD}@")
    fake.script = Script(runs=_runs(2))
    assert len(search_runs(uri, "7", "")) == 2
    assert fake.script.auth == ["Basic YWxpY2U6cHctTk9ULVNIT1dOLTYz"]  # alice:pw-NOT-SHOWN-63
    fake.script = Script(faults=dict.fromkeys(range(10), ("status", 503)))
    with pytest.raises(TrackingUnavailable) as raised:
        experiment_id(uri, "e")
    assert PASSWORD not in str(raised.value) and "***@127.0.0.1" in str(raised.value)


def test_an_unresolved_host_with_a_login_is_one_line_without_the_password(monkeypatch) -> None:
    monkeypatch.setenv(mlflow_rest.BACKOFF_ENV, "0")
    with pytest.raises(TrackingUnavailable) as raised:
        search_runs(f"http://alice:{PASSWORD}@no-such-host.invalid:5000", "7", "")
    message = str(raised.value)
    assert PASSWORD not in message and "no-such-host.invalid" in message and "\n" not in message


def test_a_trickled_answer_is_given_up_at_the_timeout(fake, monkeypatch) -> None:
    """A byte every 0.4 s never trips a per-read timeout of 1 s; the whole request is bound."""
    monkeypatch.setenv(mlflow_rest.TIMEOUT_ENV, "1")
    fake.script = Script(runs=_runs(1), faults=dict.fromkeys(range(10), ("slow",)), trickle_s=0.4)
    with pytest.raises(TrackingUnavailable) as raised:
        search_runs(fake.uri, "7", "")
    assert "no whole answer within 1 s (MLFLOW_HTTP_REQUEST_TIMEOUT)" in str(raised.value)


def test_a_bad_timeout_setting_names_the_variable(fake, monkeypatch) -> None:
    monkeypatch.setenv(mlflow_rest.TIMEOUT_ENV, "soon")
    with pytest.raises(ConfigError) as raised:
        search_runs(fake.uri, "7", "")
    assert "MLFLOW_HTTP_REQUEST_TIMEOUT='soon'" in str(raised.value)
    assert fake.script.log == []  # refused before any request


def test_a_run_created_between_pages_is_read_once(fake) -> None:
    """A cell that starts deletes its SCHEDULED run and creates a new one between two pages:
    every run is read once, none twice (8 runs were counted as 11)."""
    runs = _runs(8)
    new = make_run(50)

    def restart(held: list[dict]) -> None:
        held.remove(runs[6])
        held.insert(0, new)  # the newest sorts first

    fake.script = Script(runs=list(runs), changes={1: restart})
    got = [r["info"]["run_id"] for r in search_runs(fake.uri, "7", "", page=3)]
    assert sorted(got) == sorted(r["info"]["run_id"] for r in [*runs[:6], runs[7], new])
