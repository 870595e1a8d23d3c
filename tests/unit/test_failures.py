"""Failures grouped by kind and reason (harness/results/failures.py), on records of real runs:
tests/fixtures/runs/failures (a dead link beside a working one, Knot 3.2 over XoT) and the
verification errors of a quick.toml run before the publish-order fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.results.failures import no_result, reason_key, summarize_failures
from harness.results.folder import open_run
from harness.results.model import TransferRecord

FIXTURE = Path(__file__).parent.parent / "fixtures" / "runs" / "failures"
# As a quick.toml run of 2026-11-25 wrote them (results/20261125T155349Z-598021).
RRSUM_ERRORS = [
    "RRSUM differs: expected 2 records (sum 1b9ee79af28d4bd0…), the copy has 3 "
    "(sum 191b8b2cf295039c…)",
    "RRSUM differs: expected 2 records (sum 8abb169f8b7bb4c3…), the copy has 3 "
    "(sum 8837ba318b836c8f…)",
    "RRSUM differs: expected 2 records (sum b1cf5f4f42f4c7d5…), the copy has 3 "
    "(sum af4c02e142fc7fa1…)",
]


def failed(case: str, repeat: int, error: str, **changes: Any) -> TransferRecord:
    fields: dict[str, Any] = {
        "run_id": "r",
        "case": case,
        "repeat": repeat,
        "primary_kind": "bind",
        "secondary_kind": "bind",
        "host": "secondary",
        "site": None,
        "transport": "tcp",
        "xfr": "axfr",
        "zone": "quick.example.",
        "serial": 3,
        "records": 3,
        "bytes": 200,
        "messages": 1,
        "duration_s": 0.07,
        "started_at": 1.0,
        "ok": False,
        "error": error,
        "verified": False,
        "failure": "verification",
    }
    fields.update(changes)
    return TransferRecord(**fields)


def test_hashes_and_numbers_do_not_split_a_reason() -> None:
    assert len({reason_key(text) for text in RRSUM_ERRORS}) == 1
    assert reason_key(RRSUM_ERRORS[0]) == (
        "RRSUM differs: expected # records (sum …), the copy has # (sum …)"
    )
    records = [failed(f"bind-bind/c{i}/tcp/axfr", 1, text) for i, text in enumerate(RRSUM_ERRORS)]
    records.append(failed("bind-bind/c0/tcp/axfr", 2, RRSUM_ERRORS[1]))
    summary = summarize_failures(records)
    (group,) = summary.groups
    assert group.count == 4 and group.text == RRSUM_ERRORS[0]
    assert group.first_case == "bind-bind/c0/tcp/axfr" and group.first_repeat == 1
    assert group.per_case == {"bind-bind/c0/tcp/axfr": 2, "bind-bind/c1/tcp/axfr": 1,
                              "bind-bind/c2/tcp/axfr": 1}  # fmt: skip
    (line,) = summary.reason_lines()
    assert line.startswith("[1] 4 x copy differs from the primary: RRSUM differs: expected 2")
    assert "(first bind-bind/c0/tcp/axfr repeat 1; 2 more cases)" in line


def test_a_real_run_with_failures() -> None:
    summary = summarize_failures(open_run(FIXTURE).records)
    assert (summary.attempts, summary.counted, summary.failed) == (20, 18, 9)
    assert summary.unsupported == 2 and summary.verified == 9
    assert summary.headline == (
        "FAILED: 9 of 18 transfers failed or were not verified (they count in no figure); "
        "2 unsupported by the servers' versions (declared, not failures)"
    )
    (timeouts,) = summary.groups
    assert timeouts.kind == "timeout" and timeouts.count == 9
    assert timeouts.text.startswith("timeout after 124 s: the secondary never served")
    assert len(timeouts.cases) == 3
    assert summary.case_notes("bind-bind/loss=100%/tcp/axfr") == ["3 timed out [1]"]
    assert summary.case_notes("bind-bind/loss=0%/tcp/axfr") == []
    (unsupported,) = summary.unsupported_groups
    assert unsupported.count == 2 and "Knot 3.2.6 has no XoT" in unsupported.text
    assert summary.cases_without_result == [
        "bind-bind/loss=100%/xot/axfr",
        "bind-bind/loss=100%/tcp/axfr",
        "bind-knot/loss=100%/tcp/axfr",
    ]


def test_no_failure_says_all_verified() -> None:
    ok = failed("bind-bind/tcp/axfr", 1, None, ok=True, verified=True, failure=None)  # type: ignore[arg-type]
    summary = summarize_failures([ok])
    assert summary.headline == "all 1 transfers verified" and not summary.reason_lines()
    nothing = summarize_failures([])
    assert nothing.nothing_measured
    assert nothing.headline == (
        "FAILED: nothing was measured: no transfer counts (no transfer was recorded)"
    )


def test_every_cell_unsupported_measured_nothing() -> None:
    """Unsupported cells are declared, not failures, but a run of nothing else answers
    nothing: it must not read "all 0 transfers verified"."""
    records = [r for r in open_run(FIXTURE).records if r.unsupported]
    summary = summarize_failures(records)
    assert summary.failed == 0 and summary.unsupported == 2 and summary.nothing_measured
    assert summary.headline == (
        "FAILED: nothing was measured: no transfer counts (of 2 attempts, 2 unsupported by "
        "the servers' versions; the first: " + summary.unsupported_groups[0].text + ")"
    )
    assert summary.to_json()["nothing_measured"] is True


def test_every_attempt_failed_measured_nothing() -> None:
    records = [r for r in open_run(FIXTURE).records if not r.counts]
    summary = summarize_failures(records)
    assert summary.nothing_measured and summary.failed == 9
    assert "nothing was measured" in summary.headline
    assert "2 unsupported by the servers' versions, 9 failed or not verified" in summary.headline


def test_kinds_come_in_their_order_then_by_count() -> None:
    records = [
        failed("a/tcp/axfr", 1, "rrsum", failure="verification"),
        failed("a/tcp/axfr", 2, "timeout after 5 s", failure="timeout", duration_s=None),
        failed("a/tcp/axfr", 3, "timeout after 6 s", failure="timeout", duration_s=None),
        failed("a/tcp/axfr", 4, "named exited with status 1", failure="server", duration_s=None),
    ]
    kinds = [(g.kind, g.count) for g in summarize_failures(records).groups]
    assert kinds == [("server", 1), ("timeout", 2), ("verification", 1)]


def test_why_a_case_has_no_result() -> None:
    records = open_run(FIXTURE).records
    by_case: dict[str, list[TransferRecord]] = {}
    for record in records:
        by_case.setdefault(record.case, []).append(record)
    assert no_result(by_case["bind-bind/loss=100%/tcp/axfr"]) == "no verified transfer: 3 timed out"
    assert no_result(by_case["bind-knot/loss=0%/xot/axfr"]) == (
        "unsupported: secondary knot 3.2.6: Knot 3.2.6 has no XoT (added in 3.4)"
    )
    assert no_result(by_case["bind-bind/loss=0%/tcp/axfr"]) is None


def test_a_streams_unchecked_serials_are_neither_verified_nor_failures() -> None:
    """A stream's serials before its last were served but their copies were not read: the
    headline does not call them verified, and they fail nothing."""
    final = failed("s/tcp/ixfr", 1, None, ok=True, verified=True, failure=None)  # type: ignore[arg-type]
    why = "not verified: only the final serial's copy is checked (secondary's at serial 4 was)"
    before = [
        failed("s/tcp/ixfr", 1, None, ok=True, verified=False, failure=None, serial=s,  # type: ignore[arg-type]
               extra={"unchecked": why})
        for s in (2, 3)
    ]  # fmt: skip
    assert all(r.unchecked and not r.counts and r.failure is None for r in before)
    summary = summarize_failures([final, *before])
    assert (summary.failed, summary.unchecked, summary.verified) == (0, 2, 1)
    assert summary.headline == (
        "all 1 checked transfers verified; 2 served but not checked (a stream's serials "
        "before its last: only each secondary's final copy is verified)"
    )
    # Without its reason, a record that is ok but not verified is still a failure.
    plain = failed("s/tcp/ixfr", 1, None, ok=True, verified=False, failure=None)  # type: ignore[arg-type]
    assert plain.failure == "verification" and not plain.unchecked
