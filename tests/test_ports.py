"""The suite's free ports (`tests.distributed`) come from below the kernel's ephemeral range, so
no outgoing connection of another test can take one before its server binds it."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.distributed import free_port, free_port_run


def test_free_ports_are_below_the_ephemeral_range_and_bind():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    first = free_port_run(3)
    for port in (free_port(), first, first + 1, first + 2):
        assert 1024 <= port < low, (port, low)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
