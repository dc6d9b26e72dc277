"""The ports the tests and rigs give their servers: free, and never ones the kernel may hand an
outgoing connection in the seconds before the server listens."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from harness.processes import free_port


def _ephemeral() -> range:
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_a_server_port_lies_outside_the_range_of_outgoing_connections() -> None:
    ephemeral = _ephemeral()
    ports = [free_port() for _ in range(200)]
    assert not [port for port in ports if port in ephemeral]
    assert len(set(ports)) > 150  # picked at random, not one port handed to every caller


def test_a_server_port_is_one_nothing_listens_on(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        for port in range(20000, 32768):  # a listener of its own inside the range free_port picks from
            try:
                taken.bind(("127.0.0.1", port))
            except OSError:
                continue
            break
        taken.listen()
        busy = taken.getsockname()[1]
        # The taken port comes up first among the candidates: free_port has to pass over it.
        monkeypatch.setattr(random, "sample", lambda ports, k: [busy, *(p for p in ports[:k] if p != busy)])
        port = free_port()
        assert port != busy
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
