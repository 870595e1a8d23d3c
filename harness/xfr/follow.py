"""Following the SOA serial of many servers at once while a stream of serials goes on.

``SerialFollower`` polls every server (name -> address and network namespace) from one
background thread: one UDP socket per server, made in its namespace, all in one poll loop,
as ``poll.wait_for_serials`` does for a single serial. It differs in what it waits for:

- it never finishes by itself: the stream publishes serial after serial, and the caller
  says which is the newest (``expect``);
- it asks the servers that are behind every round; a server whose last answer was at the
  newest serial (or beyond) only every SETTLED_EVERY-th round (100 ms at 5 ms), so a fleet
  that keeps up costs the harness little between serials, yet a server that jumps ahead or
  goes back after it caught up is still seen (and judged: measure/stream_records.py);
- it reports every change of a server's serial (``take``), not only the first answer at
  one serial: a server that jumps several serials at once (a condensed transfer), goes
  back, or runs ahead of its primary is seen as it happens.

A change's ``at`` is the monotonic time of the first answer with the new serial; ``before``
the time of that server's previous answer (with the older serial): the server started
serving it somewhere between the two, so ``at - before`` is how late it may have been seen.
Answers are matched to queries by message id and question; a lost query is simply asked
again next round.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType

from harness.core.netns import socket_in
from harness.xfr import wire as w
from harness.xfr.serial import serial_lt
from harness.xfr.soa_query import address_family
from harness.xfr.soa_wire import fast_serial, name_wire, parse_soa_reply, soa_query, soa_query_tail

MAX_IDS = 4096  # query ids remembered per server while it is behind
SETTLED_EVERY = 20  # a server at the newest serial is asked every this many rounds


@dataclass(frozen=True)
class SerialChange:
    """A server answered a serial other than its last one (or its first answer)."""

    host: str
    serial: int
    at: float  # time.monotonic() of the first answer with `serial`
    before: float | None  # time.monotonic() of its previous answer; None for its first


@dataclass
class _Target:
    name: str
    sock: socket.socket
    address: tuple[str, int]
    ids: set[int]
    serial: int | None = None
    answered: float | None = None  # its last answer
    queries: int = 0


class SerialFollower:
    """Follows `targets` (name -> (address, netns)) for `zone`, polling every `interval`
    seconds those behind the newest serial (a context manager; the thread stops on exit).
    Nothing is asked before the first ``expect``."""

    def __init__(
        self,
        targets: Mapping[str, tuple[str, str | None]],
        zone: str,
        *,
        interval: float = 0.005,
        port: int = 53,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be more than 0 s, got {interval}")
        self.zone = zone
        self.interval = interval
        self._question = soa_query_tail(zone)[10:]  # name, type, class as sent
        self._qname = name_wire(zone).lower()
        self._targets: dict[int, _Target] = {}
        self._newest: int | None = None
        self._changes: list[SerialChange] = []
        self._ready = threading.Condition()
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="serial-follower", daemon=True)
        try:
            for name, (address, netns) in targets.items():
                sock = socket_in(netns, address_family(address), socket.SOCK_DGRAM)
                sock.setblocking(False)
                self._targets[sock.fileno()] = _Target(name, sock, (address, port), set())
        except BaseException:
            self._close_sockets()
            raise

    # --- the caller's side ------------------------------------------------------------------

    def __enter__(self) -> SerialFollower:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._close_sockets()

    def expect(self, serial: int) -> None:
        """`serial` is the newest: every server not serving it (or newer) is polled."""
        with self._ready:
            self._newest = serial

    def take(self, timeout: float) -> list[SerialChange]:
        """The changes seen since the last call, waiting up to `timeout` seconds for one.
        Re-raises what stopped the polling thread."""
        with self._ready:
            if not self._changes and self._failure is None and timeout > 0:
                self._ready.wait(timeout)
            if self._failure is not None:
                raise self._failure
            out, self._changes = self._changes, []
        return out

    def queries(self) -> dict[str, int]:
        """SOA queries sent to each server so far (what the following cost them)."""
        return {t.name: t.queries for t in self._targets.values()}

    # --- the polling thread -----------------------------------------------------------------

    def _close_sockets(self) -> None:
        for target in self._targets.values():
            target.sock.close()
        self._targets.clear()

    def _behind(self, target: _Target, newest: int | None) -> bool:
        if newest is None:
            return False
        return target.serial is None or serial_lt(target.serial, newest)

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # handed to the caller by take()
            with self._ready:
                self._failure = exc
                self._ready.notify_all()

    def _loop(self) -> None:
        poller = select.poll()
        for fd in self._targets:
            poller.register(fd, select.POLLIN)
        monotonic = time.monotonic
        next_send = monotonic()
        rounds = 0
        while not self._stop.is_set():
            now = monotonic()
            if now >= next_send:
                newest = self._newest
                rounds += 1
                settled = newest is not None and rounds % SETTLED_EVERY == 0
                for target in self._targets.values():
                    if settled or self._behind(target, newest):
                        self._ask(target)
                next_send = now + self.interval
            wait_ms = max(0.0, next_send - monotonic()) * 1000
            changes = []
            for fd, _ in poller.poll(wait_ms):
                changes += self._drain(self._targets[fd])
            if changes:
                with self._ready:
                    self._changes += changes
                    self._ready.notify_all()

    def _ask(self, target: _Target) -> None:
        qid = random.getrandbits(16)
        if len(target.ids) >= MAX_IDS:
            target.ids.clear()
        target.ids.add(qid)
        with contextlib.suppress(BlockingIOError, OSError):
            target.sock.sendto(soa_query(self.zone, qid), target.address)
            target.queries += 1

    def _drain(self, target: _Target) -> list[SerialChange]:
        changes = []
        while True:
            try:
                data, peer = target.sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return changes
            except OSError:
                continue  # an ICMP error while the server (re)starts; keep reading
            arrived = time.monotonic()
            if peer[0] != target.address[0] or len(data) < 12:
                continue
            got = fast_serial(data, self._question)
            if got is None:  # not the common shape: read it in full
                try:
                    reply = parse_soa_reply(data)
                except w.WireError:
                    continue
                if reply.qname != self._qname or reply.qtype != w.SOA:
                    continue
                got = reply.serving
            if got is None or w.U16.unpack_from(data, 0)[0] not in target.ids:
                continue
            if got != target.serial:
                changes.append(SerialChange(target.name, got, arrived, target.answered))
                target.serial = got
            target.answered = arrived
