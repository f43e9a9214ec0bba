"""The task command of a warm-started local cell: ask the warm server to fork the task.

submitit's local controller runs `<python> -u -m submitit.core._submit FOLDER` per task, where
`<python>` is what `scaling.warmstart.server.warm_python` gave it:

    <interpreter> -I -S client.py SOCKET INTERPRETER -u -m submitit.core._submit FOLDER

This file therefore runs with the standard library only (`-I -S`: no site-packages, so it
starts in milliseconds). It hands its stdin/stdout/stderr, environment and working directory to
the server, which forks a process that already has torch, megatron-core and mlflow imported and
runs the task there. To the controller it is the task: every signal it gets (SIGINT on cancel,
USR2 on time-out or preemption, SIGTERM) goes on to the forked process, and it exits with that
process's exit code, or dies by its signal. If the server cannot be reached or gives up, the
task runs cold, exactly the command the controller would have run without a warm server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

TASK = ["-u", "-m", "submitit.core._submit"]
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT)


def _cold(python: str, args: list[str]) -> None:
    os.execv(python, [python, *args])


def _recv_line(conn: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(64)
        if not chunk:
            raise ConnectionError("warm server closed the connection")
        data += chunk
    return data.decode().strip()


def main(argv: list[str]) -> None:
    sock_path, python, *args = argv
    if args[:3] != TASK or len(args) != 4:
        _cold(python, args)  # not a submitit task: nothing to warm-start
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(sock_path)
        request = json.dumps({"folder": args[3], "cwd": os.getcwd(), "env": dict(os.environ)})
        body = request.encode()
        socket.send_fds(conn, [struct.pack("!I", len(body))], [0, 1, 2])
        conn.sendall(body)
        pid = int(_recv_line(conn).removeprefix("pid "))
    except (OSError, ValueError, ConnectionError):
        conn.close()
        _cold(python, args)  # no server (gone, or declined to fork): run the task as usual
        return

    def relay(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in RELAYED:
        signal.signal(sig, relay)
    try:
        ended = _recv_line(conn)  # "exit CODE" or "signal NUM", once the task has ended
    except (OSError, ConnectionError):
        ended = "exit 1"  # the server died under the task (which it killed on its way out)
    kind, value = ended.split()
    sys.stdout.flush()
    if kind == "signal":
        signal.signal(int(value), signal.SIG_DFL)
        os.kill(os.getpid(), int(value))
    os._exit(int(value))


if __name__ == "__main__":
    main(sys.argv[1:])
