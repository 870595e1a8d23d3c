"""The servers' own transfer log lines, parsed from captured logs of real runs."""

from pathlib import Path

from harness.servers import Bind, Knot, Nsd
from harness.servers.log_reading import last_incoming

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_bind_incoming_and_outgoing() -> None:
    entries = Bind.parse_log((FIXTURES / "bind_xfer.log").read_text())
    incoming = [e for e in entries if e.direction == "in"]
    assert [(e.serial, e.records, e.bytes, e.messages) for e in incoming] == [
        (1, 204, 4232, 1),
        (2, 5, 205, 1),
    ]
    assert incoming[0].duration_s == 0.004
    outgoing = [e for e in entries if e.direction == "out"]
    assert [(e.xfr, e.serial) for e in outgoing] == [("axfr", 1), ("ixfr", 2)]


def test_each_side_says_whether_a_transfer_was_signed() -> None:
    # Serials 3 (tcp), 4 (tcp-tsig), 6 (xot), 8 (xot-tsig); NSD 1-3 xot, 4 tcp, 5 xot-tsig,
    # 6 tcp-tsig. Knot 3.2 never says: None, not False.
    bind = Bind.parse_log((FIXTURES / "bind_xfer_transports.log").read_text())
    signed = {(e.direction, e.serial): e.signed for e in bind}
    assert signed == {
        ("in", 3): False,
        ("in", 4): True,
        ("in", 6): False,
        ("in", 8): True,
        ("out", 3): False,
        ("out", 4): True,
        ("out", 6): False,
        ("out", 8): True,
    }
    nsd = Nsd.parse_log((FIXTURES / "nsd_xfer_transports.log").read_text())
    assert [(e.serial, e.signed, e.peer) for e in nsd] == [
        (1, False, "198.19.200.2@853"),
        (2, False, "198.19.200.2@853"),
        (3, False, "198.19.200.2@853"),
        (4, False, "198.19.200.2@53"),
        (5, True, "198.19.200.2@853"),
        (6, True, "198.19.200.2@53"),
    ]
    knot = Knot.parse_log((FIXTURES / "knot_xfer.log").read_text())
    assert knot and all(e.signed is None for e in knot)
    # A transfer whose "transferred serial" line is missing cannot say.
    lines = (FIXTURES / "bind_xfer.log").read_text().splitlines()
    alone = "\n".join(line for line in lines if "transferred serial" not in line)
    assert {e.signed for e in Bind.parse_log(alone) if e.direction == "in"} == {None}


def test_knot_takes_the_serial_from_the_started_line() -> None:
    entries = Knot.parse_log((FIXTURES / "knot_xfer.log").read_text())
    assert [(e.direction, e.xfr, e.bytes) for e in entries] == [
        ("in", "axfr", 4243),
        ("in", "ixfr", 216),
        ("out", "axfr", 4255),
        ("out", "ixfr", 250),
    ]
    assert [e.serial for e in entries if e.direction == "out"] == [1, 2]


def test_knot_3_4_lines_name_the_protocol_and_the_incoming_serial() -> None:
    # Knot 3.4.6 (the compose trixie image): "remote A@53 TCP, finished, remote serial 1, ..."
    # on the secondary, "remote A@port TCP, started, serial 1" on the primary.
    captures = FIXTURES / "failures"
    text = (captures / "knot-3.4-refused.log").read_text()
    finished = [line for line in text.splitlines() if "incoming" in line and ", finished," in line]
    incoming = Knot.parse_log(text)
    assert len(incoming) == len(finished) == 11
    assert {(e.direction, e.xfr, e.serial, e.messages, e.peer) for e in incoming} == {
        ("in", "axfr", 1, 1, "198.19.31.2@53")
    }
    assert [e.bytes for e in incoming[:3]] == [493, 484, 494]
    assert all(Knot.peer_is(e.peer, "198.19.31.2") for e in incoming)
    entry = last_incoming(Knot, text, "zovadetuf.hosting.example.", 1)
    assert entry is not None and entry.bytes == 484 and entry.at_unix is not None
    outgoing = Knot.parse_log((captures / "knot-3.4-primary.log").read_text())
    assert len(outgoing) == 11
    assert {(e.direction, e.xfr, e.serial) for e in outgoing} == {("out", "axfr", 1)}
    assert outgoing[0].peer == "198.19.31.130@36602" and outgoing[0].bytes == 493


def test_a_knot_primarys_aborted_transfers_are_no_transfers() -> None:
    # One TCP worker, six secondaries behind 2 Mbit/s: 24 outgoing AXFRs started, 1 finished;
    # the aborted ones leave no other line (Knot logs no refusal either).
    text = (FIXTURES / "failures" / "knot-primary-quota-slow.log").read_text()
    lines = text.splitlines()
    assert sum(", outgoing, " in line and ", started," in line for line in lines) == 24
    outgoing = Knot.parse_log(text)
    assert [(e.direction, e.serial, e.bytes, e.peer) for e in outgoing] == [
        ("out", 1, 3478564, "198.19.241.130@48652")
    ]


def test_nsd_commit_lines() -> None:
    entries = Nsd.parse_log((FIXTURES / "nsd_xfer.log").read_text())
    assert [(e.zone, e.serial, e.logged_at) for e in entries] == [
        ("example.", 1, "2026-11-22 01:29:47.714"),
        ("example.", 2, "2026-11-22 01:29:47.762"),
    ]


def test_last_incoming_picks_the_serial_asked_for() -> None:
    text = (FIXTURES / "bind_xfer.log").read_text()
    entry = last_incoming(Bind, text, "example", 1)
    assert entry is not None and entry.records == 204
    assert last_incoming(Bind, text, "example.", 7) is None
    assert last_incoming(Bind, "", "example.", 1) is None


def test_bind_failed_transfers_are_not_counted_as_transfers() -> None:
    # BIND ends a failed transfer with "Transfer completed: 0 messages ... (serial 0)" too.
    text = (FIXTURES / "failures" / "bind-address-not-available.log").read_text()
    completed = [line for line in text.splitlines() if "Transfer completed:" in line]
    empty = [line for line in completed if "Transfer completed: 0 messages" in line]
    assert empty and len(completed) > len(empty)
    incoming = [e for e in Bind.parse_log(text) if e.direction == "in"]
    assert len(incoming) == len(completed) - len(empty)
    assert all(e.messages and e.serial for e in incoming)


def test_bind_transfers_aborted_part_way_are_not_counted_as_transfers() -> None:
    # A Knot primary aborted three AXFRs part way; BIND ended each with "Transfer status:
    # end of file" and then "Transfer completed: 8 messages, 3787 records ... (serial 1)".
    text = (FIXTURES / "failures" / "bind-aborted-eof.log").read_text()
    completed = [line for line in text.splitlines() if "Transfer completed:" in line]
    assert len(completed) == 3
    assert all("Transfer completed: 0 messages" not in line for line in completed)
    assert "Transfer completed: 8 messages, 3787 records" in completed[0]
    assert Bind.parse_log(text) == []
    assert last_incoming(Bind, text, "quota.example.", 1) is None
    # A transfer that did complete (another capture, a BIND primary) still counts.
    served = (FIXTURES / "failures" / "bind-servfail-quota.log").read_text()
    incoming = [e for e in Bind.parse_log(served) if e.direction == "in"]
    assert [(e.serial, e.messages, e.records) for e in incoming] == [(1, 284, 100001)]


def test_each_logged_transfer_carries_its_stamp_as_unix_time() -> None:
    # Local-time stamps (BIND, NSD) are read in this host's zone, as the servers ran here;
    # Knot writes its offset and whole seconds.
    for dialect, name in ((Bind, "bind_xfer.log"), (Knot, "knot_xfer.log"), (Nsd, "nsd_xfer.log")):
        entries = dialect.parse_log((FIXTURES / name).read_text())
        stamps = [e.at_unix for e in entries]
        assert entries and all(s is not None for s in stamps), name
        assert stamps == sorted(stamps)  # the order they were written in
    nsd = Nsd.parse_log((FIXTURES / "nsd_xfer.log").read_text())
    assert nsd[1].at_unix is not None and nsd[0].at_unix is not None
    assert round(nsd[1].at_unix - nsd[0].at_unix, 3) == 0.048


def test_bind_outgoing_signed_transfers() -> None:
    # A BIND 9.18.49 primary of a PowerDNS secondary: three TSIG-signed AXFRs name the key
    # after the client ("198.18.10.130#55471/key xfrbench-xfr"), the fourth is unsigned.
    entries = Bind.parse_log((FIXTURES / "bind_xfer_out_tsig.log").read_text())
    assert [(e.direction, e.xfr, e.serial, e.bytes) for e in entries] == [
        ("out", "axfr", 1, 2900854),
        ("out", "axfr", 2, 2900854),
        ("out", "axfr", 3, 2900854),
        ("out", "axfr", 4, 2880445),
    ]
    assert entries[0].peer == "198.18.10.130#55471"
    assert all(Bind.peer_is(e.peer, "198.18.10.130") for e in entries)
