"""The window a receiver really advertises, read with sock_diag while a bulk transfer runs.

Two namespaces of our own joined by a veth pair: the receiver (the secondary's role) has
tcp_rmem "4096 16384 65536" and connects to the sender (the primary's role), which sends
for a second. ConnectionWatch samples tcp_info on both sides. tcp_rmem's maximum is a buffer,
not a window: the window advertised must stay below it (the kernel keeps part of the buffer
for overhead), and the sender must see the very window the receiver advertised.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from harness.core.netns import socket_in
from harness.link.bounds import window_limit_bps
from harness.observe import sockdiag, sockdiag_wire, tcp_info

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

SENDER, RECEIVER = "10.77.0.1", "10.77.0.2"
PORT = 5353
RMEM_MAX = 65536


@contextmanager
def veth_pair() -> Iterator[tuple[str, str]]:
    """(sender netns, receiver netns), joined by a veth pair; deleted by name afterwards."""
    tag = f"{os.getpid()}"
    sender, receiver = f"xfbwin-s-{tag}", f"xfbwin-r-{tag}"
    made: list[str] = []
    try:
        for name in (sender, receiver):
            subprocess.run(["ip", "netns", "add", name], check=True)
            made.append(name)
        subprocess.run(
            [
                "ip",
                "link",
                "add",
                "wv-s",
                "netns",
                sender,
                "type",
                "veth",
                "peer",
                "name",
                "wv-r",
                "netns",
                receiver,
            ],
            check=True,
        )
        for name, dev, address in ((sender, "wv-s", SENDER), (receiver, "wv-r", RECEIVER)):
            ip = ["ip", "-n", name]
            subprocess.run([*ip, "addr", "add", f"{address}/24", "dev", dev], check=True)
            subprocess.run([*ip, "link", "set", dev, "up"], check=True)
            subprocess.run([*ip, "link", "set", "lo", "up"], check=True)
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                receiver,
                "sysctl",
                "-qw",
                f"net.ipv4.tcp_rmem=4096 16384 {RMEM_MAX}",
            ],
            check=True,
        )
        yield sender, receiver
    finally:
        for name in reversed(made):  # the veth pair goes with its namespaces
            subprocess.run(["ip", "netns", "delete", name], check=False)


@dataclass
class Transfer:
    sender: socket.socket  # the accepted connection, which sends
    receiver: socket.socket
    reader: threading.Thread
    received: int = 0


def connect(sender_ns: str, receiver_ns: str) -> Transfer:
    """A connection from the receiver's namespace to a listener in the sender's, and a
    thread reading everything it gets."""
    listener = socket_in(sender_ns, socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((SENDER, PORT))
    listener.listen(1)
    client = socket_in(receiver_ns, socket.AF_INET, socket.SOCK_STREAM)
    client.connect((SENDER, PORT))
    conn, _ = listener.accept()
    listener.close()
    transfer = Transfer(conn, client, threading.Thread(daemon=True))

    def read() -> None:
        while chunk := client.recv(1 << 16):
            transfer.received += len(chunk)

    transfer.reader = threading.Thread(target=read, daemon=True)
    transfer.reader.start()
    return transfer


def test_advertised_window_stays_below_tcp_rmem_and_is_what_the_sender_sees() -> None:
    with veth_pair() as (sender_ns, receiver_ns):
        transfer = connect(sender_ns, receiver_ns)
        block = b"z" * (1 << 16)
        sent = 0
        with (
            sockdiag.ConnectionWatch((SENDER, PORT), netns=receiver_ns, interval=0.01) as rx,
            sockdiag.ConnectionWatch(
                (RECEIVER, None), netns=sender_ns, local_port=PORT, interval=0.01
            ) as tx,
        ):
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                transfer.sender.sendall(block)
                sent += len(block)
            # What the watch does between dumps: a lookup of the connection by its key.
            (found,) = sockdiag.tcp_connections((SENDER, PORT), netns=receiver_ns)
            diag = sockdiag.socket_for(receiver_ns)
            try:
                looked_up = sockdiag.lookup(diag, found.key)
            finally:
                diag.close()
        transfer.sender.close()
        transfer.reader.join(10)
        transfer.receiver.close()
    assert rx.error is None and tx.error is None
    assert looked_up is not None and looked_up.key == found.key
    assert sockdiag_wire.INET_DIAG_INFO in looked_up.attrs
    assert transfer.received == sent
    got, saw = rx.peaks(), tx.peaks()
    assert got["samples"] >= 2 and saw["samples"] >= 2
    assert got["connections"] == 1 and saw["connections"] == 1
    # tcp_rmem's maximum caps the buffer; the window advertised stays below the buffer.
    assert got["rcvbuf_max"] <= RMEM_MAX
    assert 0 < got["rcv_wnd_max"] < got["rcvbuf_max"]
    assert 0 < got["bytes_received"] <= sent
    # The sender's view of the peer's window is the window the receiver advertised.
    assert saw["snd_wnd_max"] == got["rcv_wnd_max"]
    assert saw["bytes_acked"] <= sent and saw["snd_cwnd_max"] > 0
    # So the bound a transfer should be read against is the advertised window over the RTT,
    # lower than tcp_rmem's maximum over the RTT for every RTT.
    rtt = 0.56
    bound = tcp_info.advertised_window_bound_bps(got, rtt)
    assert bound is not None and bound < window_limit_bps(RMEM_MAX, rtt)


def test_the_kernel_filters_dumps_and_announced_connections_need_none() -> None:
    with veth_pair() as (sender_ns, receiver_ns):
        transfer = connect(sender_ns, receiver_ns)
        local = transfer.receiver.getsockname()[:2]
        diag = sockdiag.socket_for(receiver_ns)
        try:

            def dumped(address: str, port: int | None) -> list[sockdiag_wire.DiagSocket]:
                bytecode = sockdiag_wire.remote_filter(address, port)
                chunks = sockdiag.dump(diag, None, sockdiag_wire.CONNECTED_STATES, 0, bytecode)
                return sockdiag_wire.parse_sockets(chunks)

            kept = dumped(SENDER, PORT)
            other_port, other_host, any_port = (
                dumped(SENDER, PORT + 1),
                dumped("10.77.0.9", PORT),
                dumped(SENDER, None),
            )
        finally:
            diag.close()
        # The sender's side of the connection as the SYN watch would announce it: looked up
        # by its ends, without a single walk of the kernel's table.
        with sockdiag.ConnectionWatch(
            (SENDER, PORT), netns=receiver_ns, interval=0.01, candidates=lambda: [local]
        ) as watch:
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                transfer.sender.sendall(b"z" * (1 << 16))
        transfer.sender.close()
        transfer.reader.join(10)
        transfer.receiver.close()
    assert [(s.dst, s.dport, s.sport) for s in kept] == [(SENDER, PORT, local[1])]
    assert other_port == [] and other_host == []
    assert [s.sport for s in any_port] == [local[1]]
    assert watch.error is None and watch.dumps == 0
    peaks = watch.peaks()
    assert peaks["samples"] >= 2 and peaks["connections"] == 1 and peaks["rcv_wnd_max"] > 0
