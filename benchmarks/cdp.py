"""Drive headless Chromium through its DevTools protocol, with the standard library only.

`chromium --dump-dom` shows a page as it first renders; the MLflow runs table shows a study's
children only once its parent's row is expanded, which takes a click. This opens the page in
a headless Chromium with `--remote-debugging-port`, speaks the protocol's JSON over a minimal
WebSocket client (RFC 6455: masked text frames out, unmasked frames in), and evaluates
JavaScript in the page: enough to wait for what the page shows, click, and time both.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Any


class Browser:
    """One headless Chromium with one page; `evaluate` runs JavaScript there."""

    def __init__(self, width: int = 1400, height: int = 2000) -> None:
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is None:
            raise FileNotFoundError("no chromium on PATH (apt-get install -y chromium)")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.profile = tempfile.mkdtemp(prefix="cdp-")
        args = [chromium, "--headless", "--no-sandbox", "--disable-gpu"]
        args += [f"--remote-debugging-port={port}", f"--user-data-dir={self.profile}"]
        args += [f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.sock = self._connect(port)
        self.next_id = 0

    def _connect(self, port: int) -> socket.socket:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=5) as r:
                    pages = [p for p in json.loads(r.read()) if p.get("type") == "page"]
                if pages:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("chromium's DevTools port did not answer in 60 s")
            time.sleep(0.2)
        url = urllib.parse.urlparse(pages[0]["webSocketDebuggerUrl"])
        sock = socket.create_connection((url.hostname, url.port), timeout=120)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            (
                f"GET {url.path} HTTP/1.1\r\nHost: {url.hostname}:{url.port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(4096)
        if b" 101 " not in answer.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools refused the WebSocket: {answer[:200]!r}")
        return sock

    def _send(self, text: str) -> None:
        data, mask = text.encode(), os.urandom(4)
        head = bytes([0x81])  # FIN + text frame
        if len(data) < 126:
            head += bytes([0x80 | len(data)])
        elif len(data) < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", len(data))
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", len(data))
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + masked)

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("DevTools closed the WebSocket")
            out += chunk
        return out

    def _receive(self) -> str:
        message = b""
        while True:
            first, second = self._exact(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._exact(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._exact(8))[0]
            message += self._exact(length)
            if first & 0x80:  # FIN: the message is whole
                return message.decode()

    def command(self, method: str, **params: Any) -> dict:
        """One protocol command's result (events that arrive meanwhile are skipped)."""
        self.next_id += 1
        self._send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            answer = json.loads(self._receive())
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.command("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float, poll_s: float = 0.25) -> float | None:
        """Seconds until `expression` is truthy in the page; None if not within `timeout_s`."""
        start = time.perf_counter()
        while time.perf_counter() - start < timeout_s:
            if self.evaluate(expression):
                return time.perf_counter() - start
            time.sleep(poll_s)
        return None

    def close(self) -> None:
        self.sock.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)
