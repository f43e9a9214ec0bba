"""A tracking server on loopback that answers MLflow's REST calls with scripted faults.

It pages `runs/search` as MLflow's SQL store does (offset tokens, base64 of `{"offset": N}`;
or opaque ones), over a list of runs a test may change between two requests, and answers each
request as the script says: `ok`, an HTTP status, a body cut short, garbled or as HTML, the
connection dropped, a body trickled byte by byte, or a page shifted by one run (a run created
and deleted at once). Every request is logged with what was answered.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

FAULTS = ("status", "cut", "cut_json", "garble", "html", "drop", "slow", "shape")
EXPERIMENT_ID = "7"


def make_run(num: int) -> dict:
    """A run as `runs/search` returns it: a cell's tags and metrics."""
    run_id = uuid.UUID(int=num + 1).hex
    return {
        "info": {
            "run_id": run_id,
            "run_name": f"c{num}",
            "status": "FINISHED",
            "start_time": 1_000_000 - num,
        },
        "data": {
            "tags": [{"key": "study", "value": "s"}, {"key": "cell_id", "value": f"c{num}"}],
            "metrics": [{"key": "final_val_loss", "value": 4.0 + num / 10}],
            "params": [{"key": "train.steps", "value": "6"}],
        },
    }


@dataclass
class Script:
    """What the server does, request by request: `faults[i]` answers request i (`ok` when
    absent or None); `changes[i]` is applied to the runs just before request i is answered."""

    runs: list[dict] = field(default_factory=list)
    faults: dict[int, tuple] = field(default_factory=dict)
    changes: dict[int, Callable[[list[dict]], None]] = field(default_factory=dict)
    opaque: bool = False  # page tokens that are no offsets
    trickle_s: float = 0.05  # the wait between two bytes of a `slow` answer
    log: list[tuple[str, str]] = field(default_factory=list)  # (path, what was answered)
    # each logged request's seconds from its connection's accept to its answer's last byte
    served_s: list[float] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)  # each request's Authorization
    tokens: dict[str, int] = field(default_factory=dict)  # opaque token -> offset
    only: str | None = None  # faults and changes count only requests to paths ending so


class FakeTracking:
    """The server; `uri` to reach it, `script` to tell it what to do (replace it per case)."""

    def __init__(self) -> None:
        self.script = Script()
        self.lock = threading.Lock()
        server = _AcceptTimes(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self.server = server
        self.uri = f"http://127.0.0.1:{server.server_address[1]}"
        self.thread = threading.Thread(target=server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def faulty_streak(self, late_s: float | None = None) -> int:
        """The longest run of consecutive requests answered with a fault; with `late_s`, an
        answer served later than that after its connection was accepted counts as one too (on a
        loaded machine an `ok` can reach the client after its timeout, which then retries)."""
        longest = streak = 0
        script = self.script
        served = script.served_s + [0.0] * (len(script.log) - len(script.served_s))
        for (_, what), took in zip(script.log, served, strict=True):
            late = late_s is not None and took > late_s
            streak = streak + 1 if what not in ("ok", "shift") or late else 0
            longest = max(longest, streak)
        return longest


class _AcceptTimes(ThreadingHTTPServer):
    """A threading server that notes when it accepted each connection (`accepted`)."""

    def __init__(self, *args, **kwargs) -> None:
        self.accepted: dict[int, float] = {}
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address) -> None:
        self.accepted[id(request)] = time.monotonic()
        super().process_request(request, client_address)


def _handler(fake: FakeTracking) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            self._serve(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            self._serve(json.loads(self.rfile.read(length) or b"{}"))

        def _serve(self, body: dict | None) -> None:
            script = fake.script
            start = fake.server.accepted.get(id(self.request), time.monotonic())
            with fake.lock:
                path = urlsplit(self.path).path
                counted = [p for p, _ in script.log if p.endswith(script.only or "")]
                index = len(counted) if path.endswith(script.only or "") else -1
                change = script.changes.get(index)
                if change is not None:
                    change(script.runs)
                fault = script.faults.get(index) or ("ok",)
                answer = _answer(script, path, body, self.path, fault[0] == "shift")
                script.log.append((path, fault[0]))
                script.auth.append(self.headers.get("Authorization"))
                index = len(script.log) - 1
            try:
                _send(self, script, fault, answer)
            finally:
                with fake.lock:
                    script.served_s.extend([0.0] * (index + 1 - len(script.served_s)))
                    script.served_s[index] = time.monotonic() - start
                    # a kept-alive connection's next request is timed from this answer
                    fake.server.accepted[id(self.request)] = time.monotonic()

    return Handler


def _answer(script: Script, path: str, body: dict | None, raw: str, shift: bool) -> dict:
    if path.endswith("experiments/get-by-name"):
        name = parse_qs(urlsplit(raw).query).get("experiment_name", [""])[0]
        return {
            "experiment": {
                "experiment_id": EXPERIMENT_ID,
                "name": name,
                "artifact_location": "/tmp/none",
                "lifecycle_stage": "active",
            }
        }
    if path.endswith("runs/search"):
        body = body or {}
        size = int(body.get("max_results", 1000))
        token = body.get("page_token")
        offset = _offset(script, token) if token else 0
        if shift:  # as if a run was created before this page, and deleted right after
            offset = max(0, offset - 1)
        page = script.runs[offset : offset + size]
        answer: dict = {"runs": page} if page else {}
        if len(page) == size:
            answer["next_page_token"] = _token(script, offset + size)
        return answer
    return {}


def _offset(script: Script, token: str) -> int:
    if script.opaque:
        return script.tokens[token]
    return json.loads(base64.b64decode(token))["offset"]


def _token(script: Script, offset: int) -> str:
    if not script.opaque:
        return base64.b64encode(json.dumps({"offset": offset}).encode()).decode()
    token = uuid.uuid4().hex
    script.tokens[token] = offset
    return token


def _send(handler: BaseHTTPRequestHandler, script: Script, fault: tuple, answer: dict) -> None:
    kind = fault[0]
    data = json.dumps(answer).encode()
    status, ctype = 200, "application/json"
    if kind == "status":
        status, data = fault[1], b'{"error_code": "INTERNAL_ERROR", "message": "boom"}'
    elif kind == "cut_json":  # a whole answer of JSON cut short (its length says so)
        data = data[: max(1, len(data) // 2)]
    elif kind == "garble":  # a byte that is no UTF-8
        data = data[: len(data) // 2] + b"\xff" + data[len(data) // 2 :]
    elif kind == "html":
        ctype, data = "text/html", b"<html><body>502 Bad Gateway</body></html>"
        status = fault[1] if len(fault) > 1 else 200
    elif kind == "shape":  # JSON, but not a search's
        data = json.dumps({"runs": [{"info": {"run_id": 5}}]}).encode()
    if kind == "drop":
        handler.close_connection = True
        handler.wfile.flush()
        handler.connection.close()
        return
    handler.send_response(status)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if kind == "cut":  # the length promises more than comes
        handler.wfile.write(data[: len(data) // 2])
        handler.close_connection = True
        return
    if kind == "slow":
        try:
            for byte in data:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(script.trickle_s)
        except OSError:
            pass  # the client gave up
        handler.close_connection = True
        return
    handler.wfile.write(data)
