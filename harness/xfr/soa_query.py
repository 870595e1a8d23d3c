"""Ask one server once which serial it serves for a zone: UDP, then TCP if truncated.

Thin I/O around ``harness.xfr.soa_wire``. The pollers of ``harness.xfr.poll`` ask over and
over on long-lived sockets; they use ``tcp_soa_serial`` for an answer that came truncated.
"""

from __future__ import annotations

import contextlib
import random
import socket
import time

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
