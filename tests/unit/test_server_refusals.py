"""A primary's refusals for want of a slot, counted in its own words (harness/servers/
refusals.py and each dialect's REFUSALS), on a log captured from a real BIND primary with
transfers-out = 1 (tests/fixtures/refusals/README.md)."""

from __future__ import annotations

import datetime
from pathlib import Path

from harness.servers import DIALECTS, count_refusals

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "refusals" / "bind-primary-quota.log"
UTC = datetime.UTC  # the capture's stamps: local time of a machine in UTC
REPEAT_1, REPEAT_2 = 1795623732.8027637, 1795623793.8602743  # the records' started_at


def test_bind_counts_every_quota_reached_line_of_a_window() -> None:
    text = FIXTURE.read_text()
    assert count_refusals("bind", text, 0.0, tz=UTC).refusals == 7
    first = count_refusals("bind", text, REPEAT_1, REPEAT_2, tz=UTC)
    assert first.refusals == 2  # an IXFR and its AXFR fallback, both refused
    assert first.first_line == (
        "2026-11-25T16:22:13.330 xfer-out: warning: IXFR request denied: quota reached"
    )
    assert count_refusals("bind", text, REPEAT_2, tz=UTC).refusals == 2
    assert count_refusals("bind", text, REPEAT_2 + 60, tz=UTC).refusals == 0  # logged, none


def test_only_the_refusal_line_counts() -> None:
    line = "2026-11-25T16:22:13.330 xfer-out: warning: {} request denied: {}"
    assert count_refusals("bind", line.format("AXFR", "quota reached"), 0.0).refusals == 1
    assert count_refusals("bind", line.format("AXFR", "not authoritative"), 0.0).refusals == 0
    started = "2026-11-25T16:22:12.834 xfer-out: info: client @0x7f 198.19.126.66#46168 "
    started += "(quota.example): transfer of 'quota.example/IN': AXFR-style IXFR started (serial 3)"
    assert count_refusals("bind", started, 0.0).refusals == 0


def test_a_dialect_without_a_refusal_wording_says_not_logged_never_zero() -> None:
    text = FIXTURE.read_text()  # whatever its log holds, no wording: no count
    for kind, dialect in DIALECTS.items():
        if dialect.refusals is None:
            counted = count_refusals(kind, text, 0.0)
            assert counted.refusals is None and counted.to_json()["refusals"] is None
    assert DIALECTS["bind"].refusals is not None
