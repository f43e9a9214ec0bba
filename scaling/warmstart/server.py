"""Warm start of local cells: import torch, megatron-core and mlflow once, fork each task.

A local cell is a fresh `python -m submitit.core._submit` process. Before its first step it
imported torch, megatron-core and mlflow (about 8 CPU s), and after its last one the
interpreter's teardown walked every object those left behind. In the demo's 600-step cells that
was a third of each cell's time. `run_local` therefore starts one warm server per call. It
imports those libraries once, in a single thread, and then forks each task from that state.
Every cell is still its own process, with its own submitit controller, logs, signals, exit code
and result pickle, and it computes bitwise what a cold process computes. Only the imports are
shared, and the exit skips the teardown.

The server listens on its socket (in a private 0700 directory) before importing, and
`warm_python` hands out the client command only once it does, so a cell always finds the socket
(before, a cell whose client started first under load ran cold) and is served when the imports
are done. It forks only
`submitit.core._submit FOLDER` for a client of the same user, and never another command. A
task whose client dies (the controller's SIGKILL on cancel) is killed with it. The server
watches its driver, named on its command line by pid and start time (so a driver killed during
the imports, or a pid reused since, is seen as gone): once the driver is gone, however it died
(a SIGKILL runs no cleanup), the server serves no new task and exits as soon as the tasks it
forked have ended (those cells run on, as cold local jobs outlive their submitter, and the next
driver adopts them). It never outlives both. It declines to fork at all if importing
started CUDA or left a thread running that a fork would lose. `SCALING_WARM_START=0` turns it
off. In every case where it cannot serve, the client runs the task cold
(`scaling/warmstart/client.py`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from foundation.process.proc import kill, stop
from scaling.state.files.driver_lock import process_start

__all__ = ["warm_python", "serve"]

CLIENT = Path(__file__).with_name("client.py")
PRELOAD = (
    "torch",
    "torch.distributed",
    "megatron.core",
    "megatron.core.models.gpt",
    "mlflow",
    "mlflow.tracking",
    "mlflow.store.tracking.sqlalchemy_store",
    "submitit.core.submission",
    "jobs.job",
    "jobs.loop.trainer",
    "jobs.engines.engine_megatron",
    "models",
    "data_prep",
    "matplotlib.pyplot",
    "lm_eval",  # a study's `evaluation` (jobs/evaluation/): 1 s a cell, no thread started
    "jobs.evaluation.harness",
)
# native threads a fork may drop safely: jemalloc re-creates its background thread on demand
_FORK_SAFE_THREADS = {"jemalloc_bg_thd"}


@contextmanager
def warm_python(log_folder: Path) -> Iterator[str | None]:
    """Start a warm server for this process's local cells; yield the `python` command to give
    `submitit.LocalExecutor` (None: warm start is off here, run cells cold)."""
    if os.environ.get("SCALING_WARM_START", "1") == "0" or not hasattr(os, "fork"):
        yield None
        return
    tmp = tempfile.mkdtemp(prefix="scaling-warm-")  # 0700: only this user can connect
    sock = os.path.join(tmp, "server")
    log_folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")  # one-thread imports; each task sets its own
    with open(log_folder / "warm-server.log", "a") as log:
        server = subprocess.Popen(
            [sys.executable, "-u", "-m", "scaling.warmstart.server", sock, *_driver_id()],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's Ctrl-C is for `scaling`, which stops the cells
        )
    if not _listening(server, sock):
        stop(server, timeout_s=10)
        shutil.rmtree(tmp, ignore_errors=True)
        yield None  # the server could not start: run cells cold (its log says why)
        return
    try:
        yield " ".join(
            shlex.quote(part)
            for part in (sys.executable, "-I", "-S", str(CLIENT), sock, sys.executable)
        )
    finally:
        stop(server, timeout_s=10)
        shutil.rmtree(tmp, ignore_errors=True)


def _listening(server: subprocess.Popen, sock: str, timeout_s: float = 120) -> bool:
    """Wait until `server` listens on `sock` (it renames the socket into place after listen());
    False if it exits or takes `timeout_s` (a machine too loaded to start it: cells run cold)."""
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(sock):
        if server.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _driver_id() -> tuple[str, str]:
    """This process (the driver) as the server watches it: its pid and start time."""
    return str(os.getpid()), str(process_start(os.getpid()) or 0)


def _driver_alive(pid: int, start: int) -> bool:
    """True while the driver `pid` that started at `start` lives (a reused pid is not it)."""
    if start == 0:  # no /proc where it started: its parent pid is all there is
        return os.getppid() == pid
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and process_start(pid) == start  # a zombie has died, unreaped


def serve(sock_path: str, driver: int | None = None, driver_start: int = 0) -> None:
    """The server loop (`python -m scaling.warmstart.server SOCKET DRIVER_PID DRIVER_START`)."""
    import gc
    import selectors
    import socket

    # read before the imports: a driver killed meanwhile must not pass for alive afterwards
    driver = os.getppid() if driver is None else driver
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"{sock_path}.binding")
    listener.listen(128)
    os.rename(f"{sock_path}.binding", sock_path)  # the path exists only once it accepts
    tasks: dict[int, socket.socket] = {}
    try:
        _preload(lambda: not _driver_alive(driver, driver_start))
        refusal = _fork_refusal()
        if refusal:
            print(f"warm start off: {refusal}; cells run cold", flush=True)
            listener.close()  # waiting clients read EOF and run cold
            return
        gc.freeze()  # the imported objects: never collected, so forked pages stay shared
        # terminate() from `warm_python`: the tasks go with the server (the finally below)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ)
        while (alive := _driver_alive(driver, driver_start)) or tasks:
            if not alive and listener.fileno() >= 0:
                # the driver is gone: serve no new task; those running finish (as cold local
                # jobs outlive their submitter) and the next driver waits for them
                selector.unregister(listener)
                listener.close()
            for key, _ in selector.select(timeout=0.2):
                if key.fileobj is listener:
                    conn, _ = listener.accept()
                    pid = _spawn(conn, listener, tasks)
                    if pid is not None:
                        tasks[pid] = conn
                        selector.register(conn, selectors.EVENT_READ, pid)
                elif not _alive(key.fileobj):  # the client (the controller's task) died
                    kill(key.data)
                    selector.unregister(key.fileobj)
            _reap(tasks, selector)
    finally:
        for pid in tasks:
            kill(pid)
        if Path(sock_path).parent.name.startswith("scaling-warm-"):
            shutil.rmtree(Path(sock_path).parent, ignore_errors=True)


def _preload(gone: Callable[[], bool]) -> None:
    """Import `PRELOAD`; stop early once the driver is `gone` (no task will come)."""
    import importlib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in PRELOAD:
            if gone():
                return
            try:
                importlib.import_module(name)
            except Exception as err:  # noqa: BLE001 - the task imports it itself, cold
                print(f"warm start: not preloaded {name}: {err}", flush=True)
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].switch_backend("Agg")


def _fork_refusal() -> str | None:
    """Why forking from this process would be unsafe, or None."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "importing initialised CUDA"
    names = [Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in _tasks()]
    extra = [n for n in names[1:] if n not in _FORK_SAFE_THREADS]
    if extra:
        return f"importing started threads {extra}"
    return None


def _tasks() -> list[str]:
    try:
        return sorted(os.listdir("/proc/self/task"), key=lambda t: t != str(os.getpid()))
    except OSError:
        return [str(os.getpid())]


def _spawn(conn, listener, tasks) -> int | None:
    """Read one request (3 fds, then the JSON body) and fork its task; the child's pid."""
    import json
    import socket
    import struct

    conn.settimeout(30)
    fds: list[int] = []
    try:
        head, fds, _, _ = socket.recv_fds(conn, 4, 3)
        while len(head) < 4:
            more = conn.recv(4 - len(head))
            if not more:  # a client that closed at once (a probe): nothing to fork
                raise ConnectionError("client went away")
            head += more
        body = b""
        size = struct.unpack("!I", head)[0]
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise ConnectionError("client went away")
            body += chunk
        request = json.loads(body)
        folder, cwd, env = request["folder"], request["cwd"], request["env"]
        if len(fds) != 3 or not isinstance(folder, str) or not isinstance(env, dict):
            raise ValueError("malformed request")
    except (OSError, ValueError, KeyError, ConnectionError, struct.error) as err:
        print(f"warm start: request refused: {err}", flush=True)
        for fd in fds:
            os.close(fd)
        conn.close()
        return None
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        _run_task(server, folder, cwd, env, fds, [listener, conn, *tasks.values()])
    for fd in fds:
        os.close(fd)
    conn.settimeout(None)
    try:
        conn.sendall(f"pid {pid}\n".encode())
    except OSError:
        kill(pid)
    return pid


def _run_task(
    server: int, folder: str, cwd: str, env: dict[str, str], fds: list[int], sockets: list
) -> None:
    """In the forked child: become `python -u -m submitit.core._submit FOLDER`; never returns."""
    import runpy
    import traceback

    code = 1
    try:
        _die_with(server)
        for sock in sockets:
            sock.close()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        threads = env.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0:
            sys.modules["torch"].set_num_threads(int(threads))
        sys.argv = ["submitit.core._submit", folder]
        runpy.run_module("submitit.core._submit", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exiting:
        code = exiting.code if isinstance(exiting.code, int) else (exiting.code is not None)
    except KeyboardInterrupt:
        code = -signal.SIGINT  # as a fresh interpreter: die by the signal
    except BaseException:  # noqa: BLE001 - reported in the task's log, as a cold run would
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(int(code))


def _die_with(server: int) -> None:
    """A task whose server is killed outright goes too (PR_SET_PDEATHSIG): its client has then
    reported it ended, and nobody would collect it."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != server:  # the server died before the request took effect
        os._exit(1)


def _alive(conn) -> bool:
    import socket

    try:
        return conn.recv(1, socket.MSG_DONTWAIT) != b""  # readable with no data: closed
    except BlockingIOError:
        return True
    except OSError:
        return False


def _reap(tasks, selector) -> None:
    """Collect ended tasks; tell each one's client how it ended."""
    while tasks:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = tasks.pop(pid, None)
        if conn is None:
            continue
        if os.WIFSIGNALED(status):
            message = f"signal {os.WTERMSIG(status)}\n"
        else:
            message = f"exit {os.WEXITSTATUS(status)}\n"
        try:
            selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        try:
            conn.sendall(message.encode())
        except OSError:
            pass
        conn.close()


if __name__ == "__main__":
    if len(sys.argv) > 3:
        serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    else:
        serve(sys.argv[1])
