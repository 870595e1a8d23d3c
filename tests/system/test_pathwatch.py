"""The primary's view of its paths: every connection counted as it ended, however short,
from real sockets (sock_diag's destroy notifications need CAP_NET_ADMIN)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from harness.remote.pathwatch import PathWatch

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs CAP_NET_ADMIN"),
]
ZONE_BYTES = 200_000


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


def _serve(server: socket.socket, count: int) -> None:
    for _ in range(count):
        conn, _ = server.accept()
        conn.sendall(b"x" * ZONE_BYTES)
        conn.close()


def test_connections_of_a_millisecond_are_counted_as_they_ended(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    other = socket.socket()  # a connection from another port: not a transfer's
    other.bind(("127.0.0.1", 0))
    other.listen()
    watch = PathWatch(["127.0.0.1", "192.0.2.1"], port)
    server = threading.Thread(target=_serve, args=(listener, 3))
    server.start()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port)) as client:
            while client.recv(1 << 16):
                pass
    server.join()
    with socket.create_connection(other.getsockname()) as stray:
        other.accept()[0].close()
        stray.recv(1)
    counts = watch.counts()
    other.close()
    assert watch.error is None
    assert set(counts) == {"127.0.0.1"}  # nothing to the peer that saw no connection
    seen = counts["127.0.0.1"]
    assert seen["connections"] == 3
    assert seen["data_segs_out"] >= 3
    # loopback loses nothing, but on a loaded machine a late ACK can fire a tail-loss probe,
    # which the kernel counts as a retransmission: a few, never a share of the data
    assert seen["retransmits"] <= 3
    assert seen["retransmit_pct"] == round(100 * seen["retransmits"] / seen["data_segs_out"], 4)
    assert seen["rtt_ms_min"] is not None and seen["rtt_ms_min"] > 0
