"""Failure lines counted per server, from logs of real BIND, Knot, NSD and PowerDNS
secondaries.

The fixtures are excerpts of real captures (tests/fixtures/failures/README.md says how each
was made); every expected count below was checked against the fixture with grep.
"""

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from harness import servers
from harness.core.terms import SERVER_KINDS, ServerKind
from harness.measure.logged import transfer_logged
from harness.servers import Knot, pdns
from harness.servers.bind import bind_timestamp
from harness.servers.knot import knot_timestamp
from harness.servers.nsd import nsd_timestamp
from harness.servers.pdns import pdns_timestamp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CAPTURES = FIXTURES / "failures"
# capture_refused.py ran with TZ=Asia/Kolkata: BIND and NSD wrote +05:30 local time.
IST = timezone(timedelta(hours=5, minutes=30))

# Unix times the secondaries were started: printed by capture_refused.py, or the
# transfer record's started_at (lossy.toml).
STARTED = {
    "bind-refused.log": 1795430706.240,
    "knot-refused.log": 1795430786.781,
    "nsd-refused.log": 1795430892.213,
    "bind-lossy.log": 1795430672.1210685,
    "knot-lossy.log": 1795430706.7948196,
    "pdns-refused.log": 1795625354.536,
    # fleet-gone.toml: the three gone secondaries were started together (the records'
    # extra.missing.since).
    "bind-fleet-gone.log": 1795856733.241141,
    "knot-fleet-gone.log": 1795856733.241141,
    "nsd-fleet-gone.log": 1795856733.241141,
}


def read(name: str) -> str:
    return (CAPTURES / name).read_text()


def kind_of(name: str) -> ServerKind:
    """The server kind a capture's file name starts with."""
    by_name: dict[str, ServerKind] = {kind: kind for kind in SERVER_KINDS}
    return by_name[name.split("-", 1)[0]]


# file: (address_not_available, refused, timed_out, unreachable, retry, other_failure,
#        failing_lines); None where the server does not log the category ("not logged"):
# BIND's retries, Knot's unreachable hosts, NSD's retries and (unless some were logged) its
# timeouts.
EXPECTED = {
    # BIND: "failed to connect: ..." + "Transfer status: ..." + empty "Transfer completed".
    "bind-address-not-available.log": (8, 0, 0, 0, None, 0, 24),
    # The SOA query gets an ICMP port unreachable: one "failure trying primary" line each.
    "bind-refused.log": (0, 14, 0, 0, None, 0, 14),
    # 16 SOA queries out of retries + 3 connects timed out; 3 skipped as unreachable.
    "bind-timed-out.log": (0, 0, 19, 3, None, 0, 28),
    "bind-lossy.log": (0, 0, 2, 0, None, 0, 2),
    # A reset mid-transfer (a fault): "failed while receiving responses: connection reset" and
    # its status; its "Transfer completed" says what it had received (25 messages).
    "bind-reset.log": (0, 0, 0, 0, None, 1, 2),
    # A primary without 4 of the 10 zones: each refresh is an SOA query answered REFUSED and
    # the transfer BIND tries anyway answered NOTAUTH (+ its status and empty completion).
    "bind-refused-rcode.log": (0, 16, 0, 0, None, 0, 32),
    # A BIND primary at its transfers-out quota answers SERVFAIL: no refusal in BIND's words.
    "bind-servfail-quota.log": (0, 0, 0, 0, None, 1, 3),
    # The primary closed mid-transfer: "end of file", its status, and a "Transfer completed"
    # with the messages received so far, which is no failing line of its own.
    "bind-aborted-eof.log": (0, 0, 0, 0, None, 3, 6),
    # Refused connects put the primary in BIND's unreachable cache: 2 refused (+ status and
    # completion), then 28 refreshes skipped as "unreachable (cached)", retransfers included.
    "bind-unreachable-cached.log": (0, 2, 0, 28, None, 0, 34),
    # ICMP host unreachable: the SOA queries time out (20), the TCP connects are told "host
    # unreachable" (3, + status and completion), then 14 skipped (4 + 10 of both forms).
    "bind-host-unreachable.log": (0, 0, 20, 17, None, 0, 43),
    # A fleet's host behind 100 % loss both ways from its start (issue 28), 160 s: twice its
    # SOA queries out of retries, then a connect timed out (+ status and empty completion).
    "bind-fleet-gone.log": (0, 0, 4, 0, None, 0, 8),
    # Knot: the address line, "not usable", "next retry at", "zone event failed".
    "knot-address-not-available.log": (5, 0, 0, None, 5, 0, 20),
    "knot-refused.log": (0, 7, 0, None, 7, 0, 28),
    "knot-timed-out.log": (0, 0, 5, None, 5, 0, 20),
    "knot-fleet-gone.log": (0, 0, 5, None, 5, 0, 20),
    "knot-lossy.log": (0, 0, 1, None, 1, 0, 4),
    # A reset (a fault): "fallback to AXFR (connection reset)", tried again at once.
    "knot-reset.log": (0, 1, 0, None, 0, 0, 1),
    # Knot 3.4.6 words its failures as 3.2.6 does: TCP connects refused by a reset.
    "knot-3.4-refused.log": (0, 31, 0, None, 31, 0, 124),
    # Its primary in the same capture: no failure line.
    "knot-3.4-primary.log": (0, 0, 0, None, 0, 0, 0),
    # Primaries with one slot and six secondaries asking: no line a secondary's wording
    # knows (nor any refusal: tests/fixtures/failures/README.md, "The primaries").
    "knot-primary-quota-slow.log": (0, 0, 0, None, 0, 0, 0),
    "knot-primary-idle-sweep.log": (0, 0, 0, None, 0, 0, 0),
    "nsd-primary-quota-slow.log": (0, 0, None, 0, None, 0, 0),
    # NSD: one line per failed connect, nothing else.
    "nsd-address-not-available.log": (15, 0, None, 0, None, 0, 15),
    "nsd-refused.log": (0, 18, None, 0, None, 0, 18),
    # A reset over XoT (a fault): "ssl_read returned error 5", "tls read sz: ...", then
    # "xfrd: failed reading tcp ...".
    "nsd-reset.log": (0, 0, None, 0, None, 1, 3),
    # A primary without 4 of the 10 zones answers NOTAUTH, in NSD's words.
    "nsd-refused-rcode.log": (0, 10, None, 0, None, 0, 10),
    # The kernel's connect timeout (tcp_syn_retries 2: 7 s, before xfrd's own 120 s timer).
    "nsd-connect-timed-out.log": (0, 0, 22, 0, None, 0, 22),
    # ICMP host unreachable: "No route to host".
    "nsd-no-route-to-host.log": (0, 0, None, 26, None, 0, 26),
    # A BIND primary at its transfers-out quota answers SERVFAIL.
    "nsd-servfail-quota.log": (0, 0, None, 0, None, 1, 1),
    # The primary aborted each transfer part way: an end of file, worded with a stale errno.
    "nsd-aborted-eof.log": (0, 0, None, 0, None, 3, 3),
    # The primary swept the idle, queued connection: "tcp read sz" and "failed reading tcp".
    "nsd-reset-idle.log": (0, 0, None, 0, None, 1, 2),
    # 200 s with the primary unreachable, and NSD 4.6.1 logged no failure at all.
    "nsd-timed-out.log": (0, 0, None, 0, None, 0, 0),
    # The same 160 s as bind-fleet-gone.log: NSD logged nothing but its start and stop.
    "nsd-fleet-gone.log": (0, 0, None, 0, None, 0, 0),
    # PowerDNS: "unable to xfr zone" per transfer; one "had N timeouts" line per round of SOA
    # checks counts N (one query per zone), "Unable to retrieve SOA" lines follow it. It
    # logs no retry.
    # It logs no retry, and an ICMP host unreachable as a timeout.
    "pdns-address-not-available.log": (12, 0, 5, None, None, 0, 17),
    # One SOA round timed out, then the operator's retrieve: axfr-fetch-timeout (10 s).
    "pdns-fetch-timed-out.log": (0, 0, 2, None, None, 0, 3),
    # TCP dropped, tcp_syn_retries 2: the kernel's connect timeout (7 s) came first.
    "pdns-connect-timed-out.log": (0, 0, 16, None, None, 0, 16),
    # 10 rounds: 6 of all 10 zones, then 4 of the 2 refreshed ones; 2 retrievals refused.
    "pdns-refused.log": (0, 2, 68, None, None, 0, 24),
    "pdns-timed-out.log": (0, 0, 300, None, None, 0, 55),
    # A primary without 4 of the 10 zones: each round, 4 SOA queries answered REFUSED, which
    # the round's "had 4 timeouts" counts again (left out there).
    "pdns-refused-rcode.log": (0, 36, 0, None, None, 0, 48),
    # TCP connects reset (UDP passes): a refused connect per zone and tick (an excerpt).
    "pdns-tcp-reset.log": (0, 17, 0, None, None, 0, 17),
    # ICMP host unreachable: only its SOA queries, as timeouts.
    "pdns-host-unreachable.log": (0, 0, 80, None, None, 0, 18),
}


def test_every_capture_has_expected_counts() -> None:
    assert sorted(p.name for p in CAPTURES.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_counts_per_capture(name: str) -> None:
    counts = servers.count_failures(kind_of(name), read(name), None)
    got = (
        counts.address_not_available,
        counts.refused,
        counts.timed_out,
        counts.unreachable,
        counts.retry,
        counts.other_failure,
        counts.failing_lines,
    )
    assert got == EXPECTED[name]
    assert counts.first_failure_s is None  # no start time given
    assert (counts.first_failure_line is None) == (counts.failing_lines == 0)


# One real line of each form, the capture it is taken from, and its category.
FORMS = [
    ("bind-refused-rcode.log", "refresh: unexpected rcode (REFUSED) from primary ", "refused"),
    ("bind-refused-rcode.log", ": failed while receiving responses: NOTAUTH", "refused"),
    ("bind-servfail-quota.log", ": failed while receiving responses: SERVFAIL", "other_failure"),
    ("bind-aborted-eof.log", ": failed while receiving responses: end of file", "other_failure"),
    ("bind-host-unreachable.log", ": failed to connect: host unreachable", "unreachable"),
    (
        "bind-host-unreachable.log",
        ": got_transfer_quota: skipping zone transfer as ",
        "unreachable",
    ),
    ("bind-unreachable-cached.log", ": refresh: skipping zone transfer as primary ", "unreachable"),
    ("knot-3.4-refused.log", ", failed (connection reset)", "refused"),
    ("knot-3.4-refused.log", "] refresh, failed (no usable master), next retry at ", "retry"),
    ("nsd-connect-timed-out.log", ": Connection timed out", "timed_out"),
    ("nsd-no-route-to-host.log", ": No route to host", "unreachable"),
    ("nsd-servfail-quota.log", " received error code SERVFAIL from ", "other_failure"),
    ("nsd-refused-rcode.log", " received error code SERVER NOT AUTHORITATIVE FOR ZONE ", "refused"),
    ("nsd-aborted-eof.log", "xfrd: failed reading tcp Operation now in progress", "other_failure"),
    ("nsd-reset-idle.log", "xfrd: failed reading tcp Connection reset by peer", "other_failure"),
    ("nsd-reset-idle.log", "error: tcp read sz: Connection reset by peer", "follow-up"),
]


@pytest.mark.parametrize(("name", "form", "category"), FORMS)
def test_each_form_on_its_captured_line(name: str, form: str, category: str) -> None:
    line = next(line for line in read(name).splitlines() if form in line)
    assert servers.classify(kind_of(name), line) == category, line


@pytest.mark.parametrize(
    ("name", "tz", "first_stamp", "wording"),
    [
        # Local time stamps written in Kolkata.
        ("bind-refused.log", IST, datetime(2026, 11, 23, 16, 15, 6, 462000, IST), "refused"),
        ("nsd-refused.log", IST, datetime(2026, 11, 23, 16, 18, 12, 313000, IST), "refused"),
        ("bind-lossy.log", UTC, datetime(2026, 11, 23, 10, 45, 3, 274000, UTC), "retry limit"),
        # Knot writes whole seconds with the offset: the zone passed in does not matter.
        ("knot-lossy.log", IST, datetime(2026, 11, 23, 10, 45, 13, 0, UTC), "timeout"),
        # A fleet's host unreachable from its start: the words its record's server_said
        # holds (BIND 30 s after its start, Knot's first refresh 5 s after).
        ("bind-fleet-gone.log", UTC, datetime(2026, 11, 28, 9, 6, 3, 351000, UTC), "retry limit"),
        ("knot-fleet-gone.log", UTC, datetime(2026, 11, 28, 9, 5, 38, 0, UTC), "timeout"),
        # PowerDNS writes local time, whole seconds, and no year (read near the start).
        ("pdns-refused.log", IST, datetime(2026, 11, 25, 22, 19, 18, 0, IST), "10 timeouts"),
    ],
)
def test_first_failure_since_start(
    name: str, tz: timezone, first_stamp: datetime, wording: str
) -> None:
    counts = servers.count_failures(kind_of(name), read(name), STARTED[name], tz=tz)
    assert counts.first_failure_s == pytest.approx(first_stamp.timestamp() - STARTED[name])
    assert counts.first_failure_line is not None and wording in counts.first_failure_line
    # Every line of these captures comes after the start: nothing is left out.
    assert counts.failing_lines == EXPECTED[name][-1]


def test_knot_failure_in_the_second_of_the_start_is_zero_not_negative() -> None:
    # Started at 16:16:26.781 +05:30; Knot stamps its first failure "16:16:26+0530".
    counts = servers.count_failures("knot", read("knot-refused.log"), STARTED["knot-refused.log"])
    assert counts.first_failure_s == 0.0
    assert counts.first_failure_line is not None
    assert counts.first_failure_line.startswith("2026-11-23T16:16:26+0530 ")
    assert counts.refused == EXPECTED["knot-refused.log"][1]


@pytest.mark.parametrize("name", ["bind-refused.log", "nsd-refused.log", "pdns-refused.log"])
def test_local_stamps_read_in_the_wrong_zone_are_hours_off(name: str) -> None:
    right = servers.count_failures(kind_of(name), read(name), STARTED[name], tz=IST)
    wrong = servers.count_failures(kind_of(name), read(name), STARTED[name], tz=UTC)
    assert right.first_failure_s is not None and wrong.first_failure_s is not None
    assert wrong.first_failure_s - right.first_failure_s == pytest.approx(5.5 * 3600)


def test_knot_stamps_carry_their_offset() -> None:
    text = read("knot-refused.log")
    for tz in (UTC, IST, None):
        counts = servers.count_failures("knot", text, STARTED["knot-refused.log"], tz=tz)
        assert counts.first_failure_s == 0.0


def test_timestamp_functions_read_each_servers_own_form() -> None:
    bind_line = read("bind-refused.log").splitlines()[0]
    knot_line = read("knot-refused.log").splitlines()[0]
    nsd_line = read("nsd-refused.log").splitlines()[0]
    pdns_line = read("pdns-refused.log").splitlines()[0]
    assert bind_timestamp(bind_line, IST) == pytest.approx(
        datetime(2026, 11, 23, 10, 45, 6, 462000, UTC).timestamp()
    )
    assert knot_timestamp(knot_line) == datetime(2026, 11, 23, 10, 46, 26, tzinfo=UTC).timestamp()
    assert nsd_timestamp(nsd_line, IST) == pytest.approx(
        datetime(2026, 11, 23, 10, 48, 12, 236000, UTC).timestamp()
    )
    near = STARTED["pdns-refused.log"]
    assert pdns_timestamp(pdns_line, IST, near) == (
        datetime(2026, 11, 25, 16, 49, 14, tzinfo=UTC).timestamp()
    )
    # Each reads only its own form.
    for read_stamp, others in (
        (bind_timestamp, (knot_line, nsd_line, pdns_line)),
        (knot_timestamp, (bind_line, nsd_line, pdns_line)),
        (nsd_timestamp, (bind_line, knot_line, pdns_line)),
        (pdns_timestamp, (bind_line, knot_line, nsd_line)),
    ):
        assert all(read_stamp(line, UTC) is None for line in others)


def test_lines_of_an_earlier_run_in_the_same_file_are_left_out() -> None:
    # Knot appends to its log: the timed-out run (10:37) and then the lossy one (10:45).
    earlier, later = read("knot-timed-out.log"), read("knot-lossy.log")
    start = STARTED["knot-lossy.log"]
    both = servers.count_failures("knot", earlier + later, start)
    alone = servers.count_failures("knot", later, start)
    assert both == alone
    assert both.timed_out == EXPECTED["knot-lossy.log"][2]
    # Without a start time every line counts.
    everything = servers.count_failures("knot", earlier + later, None)
    assert everything.timed_out == EXPECTED["knot-timed-out.log"][2] + both.timed_out


# Captures in which no transfer got through: 100 % loss, every one aborted, or BIND holding
# the primary as unreachable (cached) for 10 minutes, past the fault and the capture's end.
NONE_SERVED = {name for name in EXPECTED if name.endswith(("-timed-out.log", "-gone.log"))} | {
    "bind-aborted-eof.log",
    "bind-unreachable-cached.log",
    "bind-host-unreachable.log",
    "nsd-aborted-eof.log",
}

# Lines each server writes for a transfer that worked (and the harness's own pulls).
SUCCESS = {
    "bind": ("Transfer status: success", "transferred serial", "AXFR ended"),
    "knot": (", finished, ", "zone updated"),
    "nsd": (' committed "received update', " is updated to ", "info: axfr for "),
    "pdns": ("zone committed with serial", "AXFR finished"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_successful_transfer_lines_are_not_counted(name: str) -> None:
    kind = kind_of(name)
    lines = read(name).splitlines()
    ok_lines = [line for line in lines if any(p in line for p in SUCCESS[kind])]
    for line in ok_lines:
        assert servers.classify(kind, line) is None, line
    if name not in NONE_SERVED:
        assert ok_lines, f"{name} has no successful transfer around its failures"


def test_knot_zone_file_lines_are_no_failure() -> None:
    # "failed to parse zone file ... (not exists)": every cold start, no transfer failing.
    lines = [line for line in read("knot-timed-out.log").splitlines() if "failed to parse" in line]
    assert lines
    assert all(servers.classify("knot", line) is None for line in lines)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_one_servers_wording_is_not_anothers_failure(name: str) -> None:
    text = read(name)
    for other in SERVER_KINDS:
        if other != kind_of(name):
            assert servers.count_failures(other, text, None).failing_lines == 0


def test_transfer_logs_without_failures_and_a_refused_transfer() -> None:
    # The older fixtures of tests/fixtures: BIND and NSD transferring without a failure...
    for kind, name in (("bind", "bind_xfer.log"), ("nsd", "nsd_xfer.log")):
        assert servers.count_failures(kind, (FIXTURES / name).read_text(), None).failing_lines == 0
    # ...and Knot, whose primary first refused it ("not allowed"): a reason no table names.
    counts = servers.count_failures("knot", (FIXTURES / "knot_xfer.log").read_text(), None)
    assert (counts.other_failure, counts.retry, counts.attempts) == (1, 1, 1)
    assert counts.first_failure_line is not None
    assert counts.first_failure_line.endswith("failed (not allowed)")


def test_to_json_for_the_transfer_record() -> None:
    name = "bind-lossy.log"
    counts = servers.count_failures("bind", read(name), STARTED[name], tz=UTC)
    record = json.loads(json.dumps(counts.to_json()))
    assert record == {
        "server": "bind",
        "address_not_available": 0,
        "refused": 0,
        "timed_out": 2,
        "unreachable": 0,
        "retry": None,
        "other_failure": 0,
        "unlogged": ["retry"],
        "failing_lines": 2,
        "first_failure_s": pytest.approx(31.153, abs=1e-3),
        "first_failure_line": counts.first_failure_line,
        "resolution_s": 0.001,
    }


def test_a_category_a_server_does_not_log_is_none_never_zero() -> None:
    # 200 s with the primary unreachable: NSD 4.6.1 gave each attempt up on its own timer
    # and logged nothing. Its timeouts and retries are unknown, not 0.
    silent = servers.count_failures("nsd", read("nsd-timed-out.log"), None)
    assert (silent.timed_out, silent.retry) == (None, None)
    assert silent.to_json()["timed_out"] is None
    # The kernel's connect timeout, when it came first, is logged: a floor.
    logged = servers.count_failures("nsd", read("nsd-connect-timed-out.log"), None)
    assert logged.timed_out == 22 and logged.floor("timed_out")
    assert not logged.floor("refused") and not silent.floor("timed_out")
    # BIND never logs a retry, Knot never an unreachable host: None even where nothing failed.
    assert servers.count_failures("bind", "", None).retry is None
    assert servers.count_failures("knot", "", None).unreachable is None
    assert servers.count_failures("knot", "", None).retry == 0


def test_counts_read_back_from_a_record() -> None:
    counts = servers.count_failures("nsd", read("nsd-connect-timed-out.log"), None)
    back = servers.FailureCounts.from_json(json.loads(json.dumps(counts.to_json())))
    assert back == counts
    # A record of a harness that stored 0 for every category and knew no "unreachable" (the
    # transfer records of format 1 and 2 until now) still loads; {} is "no counts kept".
    old = {
        "server": "bind",
        "address_not_available": 0,
        "refused": 0,
        "timed_out": 2,
        "retry": 0,
        "other_failure": 3,
        "failing_lines": 5,
        "first_failure_s": 31.2,
        "first_failure_line": "x",
        "resolution_s": 0.001,
    }
    loaded = servers.FailureCounts.from_json(old)
    assert loaded is not None
    assert (loaded.timed_out, loaded.unreachable, loaded.retry, loaded.unlogged) == (2, 0, 0, ())
    assert loaded.attempts == 5 and loaded.first_failure_s == 31.2
    assert servers.FailureCounts.from_json({}) is None
    assert servers.FailureCounts.from_json(None) is None


def test_a_year_less_stamp_is_read_near_the_start_not_today(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # PowerDNS's "Nov 25 22:19:18" has no year: the server's start decides it, so the counts
    # of a log read a year later (today's date moved on) are the same.
    text, start = read("pdns-refused.log"), STARTED["pdns-refused.log"]
    now = servers.count_failures("pdns", text, start, tz=IST)
    assert now.first_failure_s == pytest.approx(3.464, abs=1e-3)
    monkeypatch.setattr(pdns.time, "time", lambda: start + 365 * 86400)
    assert servers.count_failures("pdns", text, start, tz=IST) == now


def test_a_round_count_leaves_out_what_was_counted_line_by_line() -> None:
    # PowerDNS: an SOA query answered REFUSED has a line of its own, and its round's summary
    # ("had 4 timeouts") counts it again among the timeouts: counted once, as refused.
    text = read("pdns-refused-rcode.log")
    rounds = [line for line in text.splitlines() if "had 4 timeouts" in line]
    refusals = [line for line in text.splitlines() if "(RCode: Query Refused)" in line]
    assert (len(rounds), len(refusals)) == (8, 36)
    counts = servers.count_failures("pdns", text, None)
    assert (counts.refused, counts.timed_out) == (36, 0)
    # A summary alone counts all it says.
    assert servers.count_failures("pdns", rounds[0], None).timed_out == 4


def test_a_hosts_log_is_read_on_its_own_clock() -> None:
    """On an inventory host 10 min ahead of the controller, the engine's `since` goes onto
    the host's clock (LiveCase.logged passes each place's host_time): the earlier run's
    lines in the same file stay out, as they do on one clock."""
    earlier, later = read("knot-timed-out.log"), read("knot-lossy.log")
    start, ahead = STARTED["knot-lossy.log"], 600.0
    alone = servers.count_failures("knot", later, start).to_json()
    engine_since = start - ahead  # the same moment on the controller's clock

    def logged(clocks: Any) -> Any:
        return transfer_logged(Knot, earlier + later, Knot, "", ("lab.", 2, "192.0.2.1"),
                               engine_since, engine_since + 60, clocks)  # fmt: skip

    assert logged((lambda t: t + ahead, lambda t: t + ahead)).failures == alone
    assert logged((lambda t: t, lambda t: t)).failures != alone  # 10 min early: both runs'
