"""Ask one server once which serial it serves for a zone: UDP, then TCP if truncated.

Thin I/O around ``harness.xfr.soa_wire``. The pollers of ``harness.xfr.poll`` ask over and
over on long-lived sockets; for an answer that came truncated they hand the TCP question to
``TcpFallback``, whose threads wait for it while the poller's loop goes on.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import socket
import time
from collections.abc import Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from harness.core.netns import socket_in
from harness.xfr import wire as w
from harness.xfr.soa_wire import parse_soa_answer, soa_query


def address_family(address: str) -> int:
    """AF_INET6 for an IPv6 address text, AF_INET for any other."""
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def tcp_soa_serial(
    address: str, zone: str, port: int, netns: str | None, timeout: float
) -> int | None:
    """The serial ``address`` serves for ``zone``, asked once over TCP (after a truncated
    UDP answer); None when it does not say (see ``parse_soa_answer``) or on any failure."""
    qid = random.getrandbits(16)
    sock = socket_in(netns, address_family(address), socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((address, port))
        sock.sendall(w.frame(soa_query(zone, qid)))
        buf = b""
        while True:
            messages, _ = w.split_messages(buf)
            if messages:
                got_id, serial, _ = parse_soa_answer(messages[0], zone)
                return serial if got_id == qid else None
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
    except (OSError, w.WireError):
        return None
    finally:
        sock.close()


@dataclass(frozen=True)
class TcpAnswer:
    """What one TCP question found: ``serial`` None when it got no usable answer; ``asked``
    is the monotonic time before it connected, ``answered`` when it ended."""

    key: Hashable
    serial: int | None
    asked: float
    answered: float


class TcpFallback:
    """TCP questions for truncated UDP answers, asked on worker threads: a poller's loop
    never waits for a connection. ``ask`` starts one (one per key at a time), ``done``
    returns those finished; ``fd`` becomes readable when one finishes (an eventfd a poller
    can wait on beside its sockets). Close it (a context manager) to stop the threads."""

    def __init__(self, timeout: float = 0.5, workers: int = 2) -> None:
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="xfrbench-soa-tcp")
        self._finished: queue.SimpleQueue[TcpAnswer] = queue.SimpleQueue()
        self._busy: set[Hashable] = set()
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def __enter__(self) -> TcpFallback:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        os.close(self.fd)

    def ask(self, key: Hashable, address: str, zone: str, port: int, netns: str | None) -> bool:
        """Ask ``address`` for ``zone``'s serial over TCP, as ``key``; False when a question
        of that key is still out."""
        if key in self._busy:
            return False
        self._busy.add(key)
        self._pool.submit(self._ask, key, address, zone, port, netns)
        return True

    def _ask(self, key: Hashable, address: str, zone: str, port: int, netns: str | None) -> None:
        asked = time.monotonic()
        serial = tcp_soa_serial(address, zone, port, netns, self.timeout)
        self._finished.put(TcpAnswer(key, serial, asked, time.monotonic()))
        os.eventfd_write(self.fd, 1)

    def done(self) -> list[TcpAnswer]:
        """The questions finished since the last call (none: an empty list)."""
        with contextlib.suppress(BlockingIOError):
            os.eventfd_read(self.fd)
        out = []
        while True:
            try:
                answer = self._finished.get_nowait()
            except queue.Empty:
                break
            self._busy.discard(answer.key)
            out.append(answer)
        return out


def query_soa_serial(
    address: str,
    zone: str,
    *,
    port: int = 53,
    netns: str | None = None,
    timeout: float = 0.5,
) -> int | None:
    """The serial ``address`` serves for ``zone``, or None (no answer in ``timeout``, not
    authoritative, SERVFAIL, REFUSED...). UDP first, TCP when the answer is truncated."""
    qid = random.getrandbits(16)
    deadline = time.monotonic() + timeout
    sock = socket_in(netns, address_family(address), socket.SOCK_DGRAM)
    try:
        sock.connect((address, port))  # connected: ICMP errors surface, strangers are dropped
        sock.send(soa_query(zone, qid))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            sock.settimeout(remaining)
            data = sock.recv(65535)
            with contextlib.suppress(w.WireError):
                got_id, serial, truncated = parse_soa_answer(data, zone)
                if got_id != qid:
                    continue
                if truncated:
                    return tcp_soa_serial(address, zone, port, netns, max(0.05, remaining))
                return serial
    except OSError:  # timeout, connection refused (ICMP port unreachable), no route
        return None
    finally:
        sock.close()
