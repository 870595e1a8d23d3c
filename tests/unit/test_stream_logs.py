"""A stream's secondary's transfers from the servers' logs: their kind, the serials they
carried and, for an AXFR in place of an IXFR, the reason either server gave (lines captured
from real runs, tests/fixtures/fallbacks/)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from harness.measure.stream_logs import stream_transfers
from harness.servers import Bind, Knot, Nsd

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


def later(log: str, ms: int) -> str:
    """BIND lines with every stamp `ms` milliseconds later (a primary busier than here)."""
    out = []
    for line in log.splitlines():
        stamp = datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f") + timedelta(milliseconds=ms)
        out.append(stamp.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + line[23:])
    return "\n".join(out)


@pytest.mark.parametrize("skew_ms", [0, 10, 500])
def test_a_primary_that_logs_the_end_after_the_secondary_commits_still_says_the_kind(
    skew_ms: int,
) -> None:
    # Captured: BIND logged "IXFR ended ... (serial 5)" at .362, 2 ms after NSD's xfrd
    # committed serial 5 at .360 (BIND writes it once it has cleaned up). On a busier host
    # the gap is larger: the transfer is still the one the primary sent.
    made = stream_transfers(
        Nsd,
        text("nsd-secondary-commits-before-bind-ends.log"),
        Bind,
        later(text("bind-primary-ends-after-nsd-commits.log"), skew_ms),
        "example.",
        "198.18.96.194",
        since=0.0,
    )
    assert made and all(t.xfr is not None for t in made), [t for t in made if t.xfr is None]
    five = next(t for t in made if t.serial == 5)
    assert (five.xfr, five.from_serial, five.source) == ("ixfr", 2, "primary")
