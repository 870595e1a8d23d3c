"""Each dialect's words for an IXFR that became an AXFR, and the transfers a stream's
secondary made, read from lines captured from real runs (tests/fixtures/fallbacks/)."""

from __future__ import annotations

from pathlib import Path

from harness.servers import Bind, Knot, Nsd

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fallbacks"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_bind_primary_says_when_an_ixfr_is_too_large_and_sends_axfr_style() -> None:
    found = Bind.parse_fallbacks(text("bind-primary-max-ixfr-ratio.log"))
    kinds = [f.kind for f in found]
    assert kinds.count("delta too large") == 6 and kinds.count("falling back to AXFR") == 6
    first = found[0]
    assert (first.server, first.side, first.zone, first.peer) == (
        "bind", "out", "example.", "198.18.115.194#59394"
    )  # fmt: skip
    assert first.text == (
        "IXFR delta size (51804 bytes) exceeds the maximum ratio to database size "
        "(387519 bytes), falling back to AXFR"
    )
    assert found[1].text == "AXFR-style IXFR" and found[1].peer == first.peer
    sent = [e for e in Bind.parse_log(text("bind-primary-max-ixfr-ratio.log"))
            if Bind.peer_is(e.peer, "198.18.115.66")]  # fmt: skip
    # AXFR (first copy), IXFR 1 -> 2, then two AXFR-style IXFRs: full zones in effect.
    assert [(e.xfr, e.from_serial, e.serial) for e in sent] == [
        ("axfr", None, 1), ("ixfr", 1, 2), ("axfr", None, 12), ("axfr", None, 32)
    ]  # fmt: skip


def test_bind_secondary_drops_a_transfer_that_failed_after_some_messages() -> None:
    # A transfer cut by the primary ends with "Transfer status: end of file" and then
    # "Transfer completed: 3 messages, 1755 records, ... (serial 12)": not a transfer.
    taken = [
        e for e in Bind.parse_log(text("bind-secondary-end-of-file.log")) if e.direction == "in"
    ]
    assert [e.serial for e in taken] == [1, 2]
    assert Bind.parse_fallbacks(text("bind-secondary-end-of-file.log")) == []


def test_knot_primary_says_its_history_is_incomplete() -> None:
    found = Knot.parse_fallbacks(text("knot-primary-journal-max-depth.log"))
    assert {f.kind for f in found} == {"journal trimmed"} and len(found) == 5
    assert found[0].text == "incomplete history, serial 2, fallback to AXFR"
    assert found[0].peer == "198.19.65.66@43075" and found[0].side == "out"


def test_knot_secondary_says_it_receives_axfr_style_and_which_serials_it_took() -> None:
    log = text("knot-secondary-given-axfr-style.log")
    found = Knot.parse_fallbacks(log)
    assert [(f.side, f.kind, f.text) for f in found] == [
        ("in", "falling back to AXFR", "receiving AXFR-style IXFR")
    ] * 2
    taken = [(e.xfr, e.from_serial, e.serial) for e in Knot.parse_log(log) if e.direction == "in"]
    # The serials come from the "zone updated, ..., serial 2 -> 8" line after each transfer.
    assert taken == [("axfr", None, 1), ("ixfr", 1, 2), ("axfr", 2, 8), ("axfr", 8, 32)]


def test_nsd_4_6_logs_no_fallback_either_side() -> None:
    assert Nsd.parse_fallbacks(text("nsd-primary-ixfr-number.log")) == []
    assert Nsd.parse_fallbacks(text("nsd-secondary-given-axfr-style.log")) == []
