"""A stream's secondary's transfers from the servers' logs: their kind, the serials they
carried and, for an AXFR in place of an IXFR, the reason either server gave (lines captured
from real runs, tests/fixtures/fallbacks/)."""

from __future__ import annotations

from pathlib import Path

from harness.measure.stream_logs import stream_transfers
from harness.servers import Bind, Knot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fallbacks"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_a_bind_secondarys_transfers_take_their_kind_and_reason_from_the_primary() -> None:
    made = stream_transfers(
        Bind,
        text("bind-secondary-given-axfr-style.log"),
        Bind,
        text("bind-primary-max-ixfr-ratio.log"),
        "example.",
        "198.18.115.66",
        since=0.0,
    )
    assert [(t.serial, t.xfr, t.from_serial, t.source) for t in made] == [
        (1, "axfr", None, "primary"), (2, "ixfr", 1, "primary"), (12, "axfr", None, "primary"),
        (32, "axfr", None, "primary"),
    ]  # fmt: skip
    assert made[1].fallback is None
    assert made[2].fallback_kind == "delta too large" and made[2].fallback_by == "bind (primary)"
    assert made[2].fallback.startswith("IXFR delta size (57523 bytes)")
    assert made[3].fallback.startswith("IXFR delta size (115053 bytes)")
    # The first copy was an AXFR asked for as such: no line says it replaced an IXFR.
    assert made[0].fallback is None


def test_a_knot_secondarys_axfr_carries_its_primarys_reason() -> None:
    made = stream_transfers(
        Knot,
        text("knot-secondary-given-axfr-style.log"),
        Knot,
        text("knot-primary-journal-max-depth.log"),
        "example.",
        "198.19.65.130",
        since=0.0,
    )
    late = [t for t in made if t.serial in (8, 32)]
    assert [(t.xfr, t.fallback_kind, t.fallback_by) for t in late] == [
        ("axfr", "journal trimmed", "knot (primary)")
    ] * 2
    assert late[0].fallback == "incomplete history, serial 2, fallback to AXFR"
