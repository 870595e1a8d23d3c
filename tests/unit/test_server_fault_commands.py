"""What each dialect gives the fault flows: its zone status and notify commands, and its log
lines since a moment (stamped in its own format)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.servers import DIALECTS, ServerSetup, count_failures
from harness.servers.base import Server
from harness.servers.bind import Bind, bind_timestamp
from harness.servers.knot import Knot, knot_timestamp
from harness.servers.log_reading import lines_since
from harness.servers.nsd import Nsd, nsd_timestamp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def server(kind: type[Server], tmp_path: Path) -> Server:
    setup = ServerSetup("primary", "198.18.0.2", ("198.18.0.6",), [], tmp_path)
    return kind(setup, Path(f"/usr/sbin/{kind.daemon}"))


@pytest.mark.parametrize(
    ("kind", "status", "notify"),
    [
        (Bind, ["zonestatus", "example."], ["notify", "example."]),
        (Knot, ["zone-status", "example."], ["zone-notify", "example."]),
        (Nsd, ["zonestatus", "example."], ["notify", "example."]),
    ],
)
def test_status_and_notify_are_the_servers_own_commands(
    kind: type[Server], status: list[str], notify: list[str], tmp_path: Path
) -> None:
    s = server(kind, tmp_path)
    assert s.zone_status_argv("example.")[-2:] == status
    assert s.notify_argv("example.")[-2:] == notify
    # Through the same control channel as every other command of that server.
    assert s.zone_status_argv("example.")[:-2] == s.control()


def test_a_dialect_without_them_says_none() -> None:
    class Bare(Bind):
        zone_status_argv = Server.zone_status_argv
        notify_argv = Server.notify_argv

    assert Bare.zone_status_argv(None, "x.") is None  # type: ignore[arg-type]
    assert Bare.notify_argv(None, "x.") is None  # type: ignore[arg-type]
    # PowerDNS keeps the defaults (its commands for these were not tried here).
    assert DIALECTS["pdns"].zone_status_argv is Server.zone_status_argv


@pytest.mark.parametrize(
    ("kind", "fixture", "stamp"),
    [
        (Bind, "bind_xfer.log", bind_timestamp),
        (Knot, "knot_xfer.log", knot_timestamp),
        (Nsd, "nsd_xfer.log", nsd_timestamp),
    ],
)
def test_lines_since_a_moment(kind: type[Server], fixture: str, stamp: object) -> None:
    text = (FIXTURES / fixture).read_text()
    lines = text.splitlines()
    stamps = [stamp(line) for line in lines]  # type: ignore[operator]
    middle = sorted(s for s in stamps if s is not None)[len(lines) // 2]
    got = lines_since(kind, text, middle)
    assert got and got[-1] == lines[-1]
    # Every line kept is stamped no earlier than the moment, to the stamps' resolution.
    for line in got:
        at = stamp(line)  # type: ignore[operator]
        assert at is None or at > middle - kind.failures.resolution_s
    assert lines_since(kind, text, 0.0) == lines
    assert lines_since(kind, text, 4e9) == []


# --- a transfer cut by a reset, as each server logged it (tests/fixtures/failures/*-reset.log)


def test_bind_a_transfer_cut_by_a_reset_is_not_a_transfer() -> None:
    text = (FIXTURES / "failures" / "bind-reset.log").read_text()
    incoming = [e for e in Bind.parse_log(text) if e.direction == "in"]
    # Its "Transfer completed: 25 messages ... (serial 9)" follows "Transfer status:
    # connection reset": only the two transfers that succeeded are transfers.
    assert [(e.serial, e.messages) for e in incoming] == [(8, 58), (9, 58)]
    counts = count_failures("bind", text, None)
    assert counts.attempts == 1 and counts.other_failure == 1


def test_knot_a_reset_then_its_fallback_to_axfr_is_a_failed_attempt() -> None:
    text = (FIXTURES / "failures" / "knot-reset.log").read_text()
    counts = count_failures("knot", text, None)
    # "connection reset" is how Knot 3.2 words every connect or I/O error but a timeout.
    assert counts.refused == 1 and counts.attempts == 1
    assert "fallback to AXFR (connection reset)" in (counts.first_failure_line or "")
    (incoming,) = [e for e in Knot.parse_log(text) if e.direction == "in"]
    assert (incoming.xfr, incoming.bytes) == ("axfr", 581927)


def test_nsd_a_reset_over_xot_is_one_failed_attempt_in_three_lines() -> None:
    text = (FIXTURES / "failures" / "nsd-reset.log").read_text()
    counts = count_failures("nsd", text, None)
    assert counts.attempts == 1 and counts.failing_lines == 3
    assert (counts.first_failure_line or "").endswith(
        "xfrd: failed reading tcp Connection reset by peer"
    )
