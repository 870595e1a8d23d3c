"""The transfer kind the servers logged for a transfer, judged against the case's, and kept
on every measured record (issue 18: a Knot secondary asked IXFR in "axfr" cases and its BIND
primary sent IXFRs, reported as AXFR times). Fake bench, no servers."""

from __future__ import annotations

from pathlib import Path

from harness.measure.logged import transfer_fallbacks
from harness.measure.xfr_seen import XfrSeen
from harness.servers import Bind, Knot
from tests.unit.test_flows import FakeBench, _plan, _run

# BIND's own line for a whole zone sent in answer to an IXFR (tests/fixtures/fallbacks/).
FALLBACKS = Path(__file__).parents[1] / "fixtures" / "fallbacks"
AXFR_STYLE = {"kind": "falling back to AXFR", "text": "AXFR-style IXFR", "side": "out"}


def test_the_primary_says_first_the_secondary_where_it_does_not() -> None:
    assert XfrSeen.of({"xfr": "ixfr"}, {"xfr": "axfr"}) == XfrSeen("ixfr", "primary")
    assert XfrSeen.of({}, {"xfr": "axfr"}) == XfrSeen("axfr", "secondary")
    # NSD 4.6 logs no kind on either side: the record says so, never a guess.
    silent = XfrSeen.of({"xfr": None}, {"xfr": None})
    assert silent == XfrSeen(None) and silent.contradiction("axfr") is None
    assert silent.to_json() == {
        "xfr": None,
        "said_by": None,
        "fallback": None,
        "fallback_kind": None,
    }


def test_an_ixfr_in_an_axfr_case_contradicts_it() -> None:
    assert XfrSeen("ixfr", "primary").contradiction("axfr") == (
        "asked AXFR, the primary's log says it sent an IXFR"
    )
    assert XfrSeen("ixfr", "secondary").contradiction("axfr") == (
        "asked AXFR, the secondary's log says it took an IXFR"
    )
    assert XfrSeen("axfr", "primary").contradiction("axfr") is None


def test_an_axfr_in_an_ixfr_case_counts_only_as_a_logged_fallback() -> None:
    assert XfrSeen("axfr", "primary").contradiction("ixfr") == (
        "asked IXFR, the primary's log says it sent a whole zone (AXFR), and no line of "
        "either says it fell back"
    )
    fell_back = XfrSeen.of({"xfr": "axfr"}, {}, [AXFR_STYLE])
    assert fell_back.contradiction("ixfr") is None
    assert fell_back.to_json()["fallback"] == "AXFR-style IXFR"
    assert fell_back.to_json()["fallback_kind"] == "falling back to AXFR"


def test_fallback_lines_of_this_secondary_since_the_repeat_began() -> None:
    # Real lines: a BIND primary sending whole zones to three secondaries, twice each, and
    # a Knot secondary given one (tests/fixtures/fallbacks/).
    primary_log = (FALLBACKS / "bind-primary-max-ixfr-ratio.log").read_text()
    secondary_log = (FALLBACKS / "knot-secondary-given-axfr-style.log").read_text()
    since = Bind.failures.timestamp("2026-11-25T17:03:48.000 x")
    assert since is not None
    found = transfer_fallbacks(
        Bind, primary_log, Bind, primary_log, "example", "198.18.115.130", since
    )
    # Not the earlier repeat's lines, nor those about other secondaries; the more
    # specific kind (max-ixfr-ratio) first.
    assert [(f["kind"], f["peer"]) for f in found] == [
        ("delta too large", "198.18.115.130#34544"),
        ("falling back to AXFR", "198.18.115.130#34544"),
    ]
    knot_since = Knot.failures.timestamp("2026-11-25T16:58:44+0000 x")
    assert knot_since is not None
    found = transfer_fallbacks(Bind, "", Knot, secondary_log, "example.", "198.19.65.3", knot_since)
    assert [(f["server"], f["side"], f["text"]) for f in found] == [
        ("knot", "in", "receiving AXFR-style IXFR")
    ]


def test_a_record_whose_logs_contradict_its_kind_does_not_count(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 1\ntransports = ["tcp"]\nxfr = ["axfr"]\n')
    (record,) = _run(FakeBench(plan, sent={"secondary": "ixfr"}))
    assert not record.ok and record.verified and record.failure == "harness"
    assert record.error == ("not an AXFR: asked AXFR, the primary's log says it sent an IXFR")
    assert record.extra["xfr_seen"]["xfr"] == "ixfr"


def test_every_measured_record_says_which_kind_was_logged(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 1\ntransports = ["tcp"]\nxfr = ["ixfr"]\n')
    (record,) = _run(FakeBench(plan, sent={"secondary": "ixfr"}))
    assert record.ok and record.extra["xfr_seen"] == {
        "xfr": "ixfr",
        "said_by": "primary",
        "fallback": None,
        "fallback_kind": None,
    }
    (unsaid,) = _run(FakeBench(plan))
    assert unsaid.ok and unsaid.extra["xfr_seen"]["xfr"] is None
    fell = FakeBench(plan, sent={"secondary": "axfr"}, fallbacks=[AXFR_STYLE])
    (record,) = _run(fell)
    assert record.ok and record.extra["xfr_seen"]["fallback"] == "AXFR-style IXFR"
    (record,) = _run(FakeBench(plan, sent={"secondary": "axfr"}))
    assert not record.ok and record.error is not None and "no line of either" in record.error
