"""One HTTP exchange within a total deadline, its faults as `Glitch`es worth a retry.

urllib's `timeout` bounds each socket operation, not the request: a server that trickles its
answer a byte a second is never given up on. `send` starts a timer with the request; when it is
up it shuts the request's sockets (recorded as they connect), which ends any read in progress,
and the exchange fails as "no whole answer within N s". A dropped connection, an answer cut
short (`http.client.IncompleteRead`) and a refused or unresolved host are Glitches too; an HTTP
error status is an answer, returned as any other.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

__all__ = ["Glitch", "send"]


class Glitch(Exception):
    """A fault worth a retry; str: what happened, for the last line."""


def send(
    request: urllib.request.Request, timeout: float, context: ssl.SSLContext | None = None
) -> tuple[int, str, bytes]:
    """(HTTP status, content type, body) of `request`, the whole exchange within `timeout`
    seconds: a timer shuts the request's sockets when it is up, which ends any read."""
    cutter = _Cutter()
    timer = threading.Timer(timeout, cutter.cut)
    timer.daemon = True
    opener = urllib.request.build_opener(_HttpHandler(cutter), _HttpsHandler(cutter, context))
    timer.start()
    try:
        try:
            with opener.open(request, timeout=timeout) as resp:
                return resp.status, resp.headers.get_content_type(), resp.read()
        except urllib.error.HTTPError as err:
            with err:
                return err.code, err.headers.get_content_type(), err.read()
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        if cutter.expired.is_set():
            why = f"no whole answer within {timeout:g} s (MLFLOW_HTTP_REQUEST_TIMEOUT)"
            raise Glitch(why) from None
        reason = err.reason if isinstance(err, urllib.error.URLError) else err
        raise Glitch(f"no answer ({type(reason).__name__}: {reason})") from None
    finally:
        timer.cancel()


class _Cutter:
    """The sockets of one exchange, shut at once when its time is up (`cut`), also one that
    connects after that."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.expired = threading.Event()
        self._lock = threading.Lock()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self.sockets.append(sock)
        if self.expired.is_set():
            self.cut()

    def cut(self) -> None:
        self.expired.set()
        with self._lock:
            sockets = list(self.sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed


def _recorded(connection: type, cutter: _Cutter) -> Callable[..., Any]:
    """A `connection` class whose socket, once connected, is the `cutter`'s to shut."""

    def make(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
        conn = connection(*args, **kwargs)
        connect = conn.connect

        def connect_and_record() -> None:
            connect()
            cutter.add(conn.sock)

        conn.connect = connect_and_record
        return conn

    return make


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, cutter: _Cutter) -> None:
        super().__init__()
        self._cutter = cutter

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_recorded(http.client.HTTPConnection, self._cutter), req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, cutter: _Cutter, context: ssl.SSLContext | None) -> None:
        super().__init__(context=context)
        self._cutter = cutter

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = _recorded(http.client.HTTPSConnection, self._cutter)
        return self.do_open(connection, req, context=self._context)
