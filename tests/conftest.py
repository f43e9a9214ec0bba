"""Fixtures shared by every test package: paths and a real local MLflow server.

`SCALING_REQUIRE_SERVICES=1` (set by .ci/run) turns a skip for a missing service (Slurm, the
MLflow server, ../shared, PostgreSQL) into a failure: in CI a test that cannot run is a broken
environment, not a pass. Only tests marked `gpu` may still skip there (CI has no GPU).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from foundation.process.proc import stop
from tests.distributed import free_port

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
# studies analysed by tests are not about inference cost: no measuring at analysis time
# (tests/scaling/inference_cost/test_inference_cost.py turns it back on for its own study)
os.environ.setdefault("SCALING_INFERENCE_COST", "off")
# `scaling run` and `status --watch` see a round's end within 1 s, not 5: the end-to-end tests
# wait on rounds (docs/testing.md, "How to stay inside the budget")
os.environ.setdefault("SCALING_POLL_S", "1")


def services_required() -> bool:
    return os.environ.get("SCALING_REQUIRE_SERVICES") == "1"


def skip_unless_required(reason: str) -> None:
    """Skip with `reason`, or fail with it where CI requires every service."""
    if services_required():
        pytest.fail(f"SCALING_REQUIRE_SERVICES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _quiet_settings_stay_in_their_test():
    """A command run in-process without `--verbose` sets MLflow's quiet settings in os.environ;
    put them back, so a later test's subprocess starts from the user's own environment."""
    from foundation.process import quiet

    saved = {key: os.environ.get(key) for key in quiet.QUIET_ENV}
    state = dict(quiet._state)
    yield
    quiet._state.update(state)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


CI_BUDGET_S = 15 * 60  # .ci/run on 2 cores, services included (docs/testing.md)


def pytest_terminal_summary(terminalreporter):
    """Under .ci/run: the whole run's time so far beside its budget, before pytest's last line."""
    start = os.environ.get("SCALING_CI_START")
    if not start:
        return
    spent = time.time() - float(start)
    terminalreporter.write_sep("=", "suite budget")
    terminalreporter.write_line(
        f".ci/run so far: {spent:.0f} s of its {CI_BUDGET_S} s budget on 2 cores "
        f"({100 * spent / CI_BUDGET_S:.0f}%; docs/testing.md says how to stay inside it)"
    )


# How scripts/test.sh spreads the suite over its workers (`-n 2 --dist loadgroup
# --no-loadscope-reorder`): xdist hands out whole groups, in the order of the items.
# - Tests that use Slurm (the `slurm` mark: the machine's cluster, its few CPUs and its queue, or
#   a multi-node cluster of their own on Slurm's fixed ports) form one group and run one after
#   another. The other fault tests own their servers on free ports and spread like the rest.
# - Every other module is one group: its module-scoped fixtures and cached replays (one launch of
#   test_cuda_branches, one browser, one null run) are paid once, not once per worker.
# - The longest groups go first (the Slurm group, then modules with a `slow` test), so that no
#   long module starts last and runs alone at the end.
# xdist's own `xdist_group` marks do not group under pytest 9 (xdist 3.8 renames `item._nodeid`,
# which pytest 9's `nodeid` no longer reads: every test was a group of its own and Slurm's tests
# ran on both workers at once). So the workers write each test's group to a file the controller
# named (`SCALING_TEST_GROUPS`), and the controller's scheduler (`pytest_xdist_make_scheduler`)
# reads its scopes from it.
SERIAL_GROUP = "slurm"
GROUPS_ENV = "SCALING_TEST_GROUPS"


def _group(item) -> str:
    if item.get_closest_marker("slurm"):
        return SERIAL_GROUP
    return item.nodeid.split("::", 1)[0]


def pytest_configure(config):
    # A suite started in the background of a non-interactive shell (`bash .ci/run &`, a CI
    # runner's step) inherits SIGINT ignored, and so would every process a test starts: a
    # Ctrl-C test would then drive a background job, whose `scaling run` ignores the terminal's
    # interrupt, and leave its cells training for the rest of the suite. Each pytest process
    # takes SIGINT as a terminal's foreground job does (its children start with the default);
    # a test of the ignored case sets SIG_IGN itself (tests/scaling/state/test_cancel_local.py).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        import tempfile

        # the controller, before it starts its workers (they inherit the environment)
        os.environ[GROUPS_ENV] = os.path.join(tempfile.mkdtemp(prefix="scaling-groups-"), "g")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    groups = {item.nodeid: _group(item) for item in items}
    slow = {groups[item.nodeid] for item in items if item.get_closest_marker("slow")}

    def rank(item) -> int:
        group = groups[item.nodeid]
        return 0 if group == SERIAL_GROUP else 1 if group in slow else 2

    items.sort(key=rank)  # stable: a module's own order is kept
    path = os.environ.get(GROUPS_ENV)
    if path and hasattr(config, "workerinput"):
        import json

        tmp = f"{path}.{config.workerinput['workerid']}"
        with open(tmp, "w") as f:
            json.dump(groups, f)
        os.replace(tmp, path)  # every worker writes the same map


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup`: whole groups per worker, the groups read from the workers' map."""
    if config.getvalue("dist") != "loadgroup" or not os.environ.get(GROUPS_ENV):
        return None
    import json

    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None
        crashed: set[str]  # groups that lost a worker once already

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                with open(os.environ[GROUPS_ENV]) as f:
                    self.groups = json.load(f)
            return self.groups.get(nodeid) or nodeid.split("::", 1)[0]

        def _assign_work_unit(self, node) -> None:
            """A worker that died after its last report, read before xdist marked it down: the
            send fails (`cannot send (already closed?)`, which once ended a CI run with an
            INTERNALERROR). The group goes back to the front of the queue, untouched; the
            worker's loss then reaches `remove_node` as any crash does."""
            scope = next(iter(self.workqueue))
            try:
                super()._assign_work_unit(node)
            except OSError:
                self.workqueue[scope] = self.assigned_work[node].pop(scope)
                self.workqueue.move_to_end(scope, last=False)

        def remove_node(self, node) -> str | None:
            """A worker that died (OOM-killed, a test that `os._exit`s) mid-group: xdist reports
            the test it was running as failed; here that test is never run again, and the rest
            of its group is handed out once more, once. A group that loses a second worker has
            its remaining tests reported failed, so the run always ends. (xdist's own
            LoadScope re-ran the crashing test on each replacement worker until the restart
            limit, and the run could then wait forever for the lost group.)"""
            workload = self.assigned_work.pop(node)
            pending = [
                (scope, nodeid)
                for scope, unit in workload.items()
                for nodeid, done in unit.items()
                if not done
            ]
            if not pending:
                return None
            scope, crashitem = pending[0]  # the first unfinished test is the one that ran
            workload[scope][crashitem] = True  # reported failed by xdist; never run again
            if not hasattr(self, "crashed"):
                self.crashed = set()
            for unit_scope, unit in workload.items():
                rest = [nodeid for nodeid, done in unit.items() if not done]
                if not rest:
                    continue
                if unit_scope == scope and scope in self.crashed:
                    for nodeid in rest:
                        _report_lost(self.config, node, nodeid, scope, crashitem)
                    continue
                self.workqueue[unit_scope] = unit
                self.workqueue.move_to_end(unit_scope, last=False)
            self.crashed.add(scope)
            for other in self.assigned_work:
                self._reschedule(other)
            return crashitem

    return GroupScheduling(config, log)


def _report_lost(config, node, nodeid: str, group: str, crashitem: str) -> None:
    """A test of a group that lost a second worker: reported failed, not run."""
    rep = pytest.TestReport(
        nodeid=nodeid,
        location=(nodeid.split("::")[0], None, nodeid),
        keywords={},
        outcome="failed",
        longrepr=(
            f"not run: group {group!r} lost a second worker ({node.gateway.id!r} crashed while "
            f"running {crashitem!r}); its remaining tests are not handed out again"
        ),
        when="call",
    )
    rep.node = node
    config.hook.pytest_runtest_logreport(report=rep)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With SCALING_TEST_TIMES=FILE: each test's wall and CPU seconds appended to FILE
    (tests/suite_times.py; benchmarks/suite_times.py sums them)."""
    from tests import suite_times  # lazy: only this hook reads /proc

    path = os.environ.get(suite_times.TIMES_ENV)
    started = suite_times.start() if path else None
    yield
    if path and started is not None:
        suite_times.record(path, item.nodeid, started)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """The net under `skip_unless_required`: in CI, any other skip fails too (except `gpu`)."""
    outcome = yield
    report = outcome.get_result()
    if (
        services_required()
        and report.skipped
        and not hasattr(report, "wasxfail")
        and item.get_closest_marker("gpu") is None
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under SCALING_REQUIRE_SERVICES=1: {reason}"


@pytest.fixture(scope="session", autouse=True)
def _user_folders_stay_untouched():
    """Hermetic tests: no test writes the repository's `runs/`, `data/` or `mlruns/` (a user's
    demo lives there, and a test that read it would plan the user's cells, not the file's)."""
    from tests.shipped import user_folders_snapshot

    before = user_folders_snapshot()
    yield
    after = user_folders_snapshot()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"tests wrote the repository's user folders: {changed[:10]}"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        skip_unless_required(f"{SHARED} is not here; tests that read shared fixtures need it")
    return SHARED


def wait_for_http(url: str, timeout: float, alive: subprocess.Popen | None = None) -> bool:
    """True once `url` answers 200; False after `timeout`, or at once if `alive` has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (alive is None or alive.poll() is None):
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            time.sleep(0.5)
    return False


def start_mlflow_server(
    root: Path,
    port: int | None = None,
    backend_uri: str | None = None,
    app_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start `mlflow server` on loopback; return (proc, uri).

    Its store is `backend_uri` (e.g. a PostgreSQL DSN) or a SQLite file under ``root``;
    `app_args` go before the store (e.g. ``("--app-name", "basic-auth")``), `env` replaces the
    server's environment.
    """
    root.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    # MLflow's job runner (seven huey consumers per server, for its GenAI jobs) doubles the
    # server's start-up CPU and time; the project uses none of its jobs
    env = {**(os.environ if env is None else env), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    mlflow_bin = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
    log = open(root / "server.log", "ab")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [
            mlflow_bin,
            "server",
            *app_args,
            "--backend-store-uri",
            backend_uri or f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    uri = f"http://127.0.0.1:{port}"
    if not wait_for_http(f"{uri}/health", timeout=180, alive=proc):
        proc.kill()
        raise RuntimeError(f"mlflow server did not answer on {uri}; see {root / 'server.log'}")
    return proc, uri


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory) -> str:
    """URI of a running MLflow tracking server: the one .ci/run started, or a fresh one."""
    uri = os.environ.get("SCALING_TEST_MLFLOW_URI")
    if uri and wait_for_http(f"{uri}/health", timeout=30):
        yield uri
        return
    if services_required():
        pytest.fail(
            f"SCALING_REQUIRE_SERVICES=1 but the MLflow server at {uri!r} "
            "(SCALING_TEST_MLFLOW_URI) does not answer",
            pytrace=False,
        )
    proc, uri = start_mlflow_server(tmp_path_factory.mktemp("mlflow"))
    try:
        yield uri
    finally:
        stop(proc)


@pytest.fixture
def slurm_cluster() -> None:
    """Skip (with the reason) unless a Slurm controller answers `sinfo`."""
    from scaling.spec.resources import slurm_available

    ok, why = slurm_available()
    if not ok:
        skip_unless_required(f"no Slurm cluster reachable ({why}); .ci/slurm/start.sh starts one")
