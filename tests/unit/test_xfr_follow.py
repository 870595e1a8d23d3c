"""The stream's serial follower against real UDP responders on loopback (no root needed)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import dns.flags
import dns.message
import dns.rrset
import pytest

from harness.xfr.follow import SETTLED_EVERY, SerialChange, SerialFollower

ZONE = "example."
SOA_TEXT = "ns1.example. hostmaster.example. {} 900 300 604800 900"


class Server:
    """Answers SOA queries for ZONE with `serial`, which the test changes as it goes."""

    def __init__(self, address: str, port: int, serial: int) -> None:
        self.serial = serial
        self.queries = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((address, port))
        self.sock.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(512)
            except TimeoutError:
                continue
            self.queries += 1
            query = dns.message.from_wire(data)
            response = dns.message.make_response(query)
            response.flags |= dns.flags.AA
            text = SOA_TEXT.format(self.serial)
            response.answer.append(dns.rrset.from_text(ZONE, 60, "IN", "SOA", text))
            self.sock.sendto(response.to_wire(), peer)


@pytest.fixture
def servers() -> list[Server]:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    made = [Server("127.0.0.1", port, 10), Server("127.0.0.2", port, 10)]
    yield made
    for server in made:
        server.close()


def _until(follower: SerialFollower, wanted: int, seconds: float = 5.0) -> list[SerialChange]:
    got: list[SerialChange] = []
    deadline = time.monotonic() + seconds
    while len(got) < wanted and time.monotonic() < deadline:
        got += follower.take(0.1)
    return got


def _eventually(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    """Whether `condition` holds within `seconds` (a loaded host schedules threads late)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# Alone (tests/conftest.py): a change is seen within 0.5 s of the round before it, by the clock.
@pytest.mark.alone
def test_changes_are_reported_and_settled_servers_are_asked_less_often(
    servers: list[Server],
) -> None:
    a, b = servers
    port = a.sock.getsockname()[1]
    targets = {"a": ("127.0.0.1", None), "b": ("127.0.0.2", None)}
    with SerialFollower(targets, ZONE, interval=0.005, port=port) as follower:
        assert follower.take(0.05) == [] and a.queries == 0  # nothing asked before expect
        follower.expect(11)
        first = _until(follower, 2)
        assert {(c.host, c.serial, c.before) for c in first} == {("a", 10, None), ("b", 10, None)}
        a.serial = 13  # a jumps two serials at once (a condensed transfer)
        follower.expect(13)
        (jump,) = _until(follower, 1)
        assert (jump.host, jump.serial) == ("a", 13)
        assert jump.before is not None and 0 < jump.at - jump.before < 0.5
        # a is at the newest serial: it is asked every SETTLED_EVERY-th round only (about
        # every 100 ms); b, behind, every round.
        time.sleep(0.3)
        asked_a, asked_b = a.queries, b.queries
        assert _eventually(lambda: b.queries > asked_b + 5 * SETTLED_EVERY)
        assert 0 < a.queries - asked_a < (b.queries - asked_b) / 4
        b.serial = 14  # ahead of everything published: reported as it is
        (ahead,) = _until(follower, 1)
        assert (ahead.host, ahead.serial) == ("b", 14)
        # Both are settled now, and still asked: one that goes back after it caught up,
        # or jumps ahead, is seen (stream_records judges it).
        a.serial = 12
        (back,) = _until(follower, 1)
        assert (back.host, back.serial) == ("a", 12)
        b.serial = 20
        (jump,) = _until(follower, 1)
        assert (jump.host, jump.serial) == ("b", 20)
        assert follower.queries()["a"] >= 2


def test_a_server_that_goes_silent_is_asked_until_it_answers(servers: list[Server]) -> None:
    a, _ = servers
    port = a.sock.getsockname()[1]
    a.close()  # nothing answers at 127.0.0.1 now
    with SerialFollower({"a": ("127.0.0.1", None)}, ZONE, port=port) as follower:
        follower.expect(11)
        assert _until(follower, 1, seconds=0.2) == []
        assert _eventually(lambda: follower.queries()["a"] >= 10)
