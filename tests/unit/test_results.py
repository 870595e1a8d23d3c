"""Result model, run store and summaries on synthetic records."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import UserInputError
from harness.core.stats import nearest_rank
from harness.results import FORMAT_VERSION, ResultFormatError, RunStore, TransferRecord
from harness.results.folder import read_run
from harness.results.store import new_run_id
from harness.results.summary import summarize, to_csv


def record(**changes: Any) -> TransferRecord:
    base: dict[str, Any] = {
        "run_id": "r1",
        "case": "bind-bind-tcp-axfr",
        "repeat": 0,
        "primary_kind": "bind",
        "secondary_kind": "bind",
        "host": "secondary",
        "site": None,
        "transport": "tcp",
        "xfr": "axfr",
        "zone": "example.",
        "serial": 1,
        "records": 1000,
        "bytes": 50_000,
        "messages": 4,
        "duration_s": 1.0,
        "started_at": 1_700_000_000.0,
        "ok": True,
        "verified": True,
    }
    base.update(changes)
    return TransferRecord(**base)


def test_json_round_trip_keeps_every_field() -> None:
    original = record(
        trigger="notify",
        method="server-to-server",
        phases={"soa_check": 0.001, "connect": 0.002, "served": 0.9},
        server_logged={"duration_s": 0.85, "records": 1000},
        bound={"window_bps": 1e9},
        extra={"note": "x"},
    )
    line = original.to_json()
    assert "\n" not in line
    data = json.loads(line)
    for name in ("run_id", "case", "repeat", "primary_kind", "secondary_kind", "host", "transport"):
        assert name in data
    assert data["format_version"] == FORMAT_VERSION
    assert TransferRecord.from_json(line) == original


@pytest.mark.parametrize(
    "changes",
    [
        {"duration_s": -0.001},
        {"phases": {"connect": -1.0}},
        {"duration_s": math.nan},
        {"transport": "udp"},
        {"xfr": "ixfr2"},
        {"records": -1},
        {"ok": False, "error": None},
        {"unsupported": True, "ok": True, "error": "no XoT"},
    ],
)
def test_invalid_records_are_rejected(changes: dict[str, Any]) -> None:
    with pytest.raises(ResultFormatError):
        record(**changes)


def test_from_json_rejects_unknown_fields_and_future_versions() -> None:
    data = record().to_dict()
    with pytest.raises(ResultFormatError, match="unknown record fields: colour"):
        TransferRecord.from_dict({**data, "colour": "red"})
    with pytest.raises(ResultFormatError, match="upgrade"):
        TransferRecord.from_dict({**data, "format_version": FORMAT_VERSION + 1})
    with pytest.raises(ResultFormatError, match="duration_s is -2"):
        TransferRecord.from_dict({**data, "duration_s": -2})


def test_percentiles_by_nearest_rank_are_measured_values() -> None:
    values = [float(v) for v in range(1, 11)]  # 1..10
    assert nearest_rank(values, 50) == 5.0  # the 5th of 10: half are at or below it
    assert nearest_rank(values, 10) == 1.0
    assert nearest_rank(values, 90) == 9.0
    assert nearest_rank(values, 91) == 10.0
    assert nearest_rank([3.0], 90) == 3.0
    assert nearest_rank(values, 0) == 1.0 and nearest_rank(values, 100) == 10.0
    # Four secondaries: p95 is the 4th, the time all of them had it (interpolation gave
    # 0.15 x3 + 0.85 x4, a time at which only 3 of 4 had it).
    assert nearest_rank([1.0, 2.0, 3.0, 10.0], 95) == 10.0
    assert nearest_rank([float(v) for v in range(1, 21)], 95) == 19.0  # rank 19 exactly
    with pytest.raises(ValueError):
        nearest_rank([], 50)


def test_summary_counts_only_ok_and_verified() -> None:
    durations = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    records = [record(repeat=i, duration_s=d) for i, d in enumerate(durations)]
    records += [
        record(repeat=20, duration_s=0.001, verified=False),  # never counts
        record(repeat=21, duration_s=None, ok=False, error="timeout after 60.0 s"),
        record(repeat=22, duration_s=None, ok=False, unsupported=True, error="no XoT in Knot"),
        record(case="other", duration_s=1.0),
    ]
    first, other = summarize(records)
    assert (first.case, first.n, first.ok, first.unsupported, first.failed) == (
        "bind-bind-tcp-axfr",
        13,
        10,
        1,
        2,
    )
    assert first.median_s == 5.5
    assert first.p10_s == 1.0  # nearest rank: a real duration
    assert first.p90_s == 9.0
    assert first.mean_s == 5.5
    assert first.stdev_s == pytest.approx(3.0277, rel=1e-4)
    assert first.cv == pytest.approx(3.0277 / 5.5, rel=1e-4)
    assert first.unstable  # cv 55 %
    # throughput: median of 400 kbit / d; records/s: median of 1000 / d
    rates = sorted(50_000 * 8 / d for d in durations)
    assert first.throughput_bps == pytest.approx((rates[4] + rates[5]) / 2)
    assert first.records_per_s == pytest.approx((1000 / 5 + 1000 / 6) / 2)
    assert (other.n, other.ok, other.unstable) == (1, 1, True)  # n < 3


def test_summary_stable_case_and_csv() -> None:
    records = [record(repeat=i, duration_s=d) for i, d in enumerate([1.0, 1.02, 0.98, 1.01])]
    (summary,) = summarize(records)
    assert not summary.unstable and summary.cv is not None and summary.cv < 0.1
    csv_text = to_csv([summary])
    header, row = csv_text.strip().splitlines()
    assert header.startswith("case,primary_kind,secondary_kind,transport,xfr,method,n,ok")
    assert row.startswith("bind-bind-tcp-axfr,bind,bind,tcp,axfr,server-to-server,4,4")


def test_no_counted_records_gives_empty_figures() -> None:
    (summary,) = summarize([record(ok=False, error="x", duration_s=None)])
    assert summary.median_s is None and summary.throughput_bps is None and summary.unstable


def test_store_appends_durably_and_finishes(tmp_path: Path) -> None:
    meta = {"scenario": {"name": "quick"}, "spec_hash": "abc"}
    with RunStore.create(tmp_path, "r1", None, meta) as store:
        for i, d in enumerate([1.0, 2.0, 3.0]):
            store.append(record(repeat=i, duration_s=d))
        # Each line is on disk as soon as append returns.
        assert len((store.folder / "transfers.jsonl").read_text().splitlines()) == 3
        with pytest.raises(ResultFormatError):
            store.append(record(run_id="someone-else"))
    run, records = read_run(tmp_path / "r1")
    assert run.run_id == "r1" and run.interrupted is False and run.finished
    assert run.scenario == {"name": "quick"} and run.transfers == 3
    assert [r.duration_s for r in records] == [1.0, 2.0, 3.0]
    summary = json.loads((tmp_path / "r1" / "summary.json").read_text())
    assert summary["cases"][0]["median_s"] == 2.0
    assert summary["percentiles"] == "nearest rank"  # says how p10 and p90 were taken
    assert (tmp_path / "r1" / "summary.csv").read_text().startswith("case,")
    assert not [p for p in (tmp_path / "r1").iterdir() if p.name.startswith(".")]  # no temps


def test_store_marks_interrupted_runs(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), RunStore.create(tmp_path, None, None, {}) as store:
        store.append(record(run_id=store.run_id))
        raise KeyboardInterrupt
    run, records = read_run(store.folder)
    assert run.interrupted is True and len(records) == 1


def test_store_refuses_to_mix_runs(tmp_path: Path) -> None:
    RunStore.create(tmp_path, "r1", None, {}).finish()
    with pytest.raises(UserInputError, match="not empty"):
        RunStore.create(tmp_path, "r1", None, {})
    with pytest.raises(UserInputError):
        RunStore.create(tmp_path, "../x", None, {})
    out = tmp_path / "elsewhere"
    store = RunStore.create(tmp_path, "r2", out, {})
    assert store.folder == out and (out / "run.json").exists()
    store.finish()


def test_load_run_tolerates_a_truncated_last_line_only(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "r1", None, {})
    store.append(record())
    store.append(record(repeat=1))
    store.finish()
    transfers = store.folder / "transfers.jsonl"
    full = transfers.read_text()
    transfers.write_text(full + record(repeat=2).to_json()[:40])  # a killed writer
    _, records = read_run(store.folder)
    assert [r.repeat for r in records] == [0, 1]
    lines = full.splitlines()
    transfers.write_text(lines[0][:30] + "\n" + lines[1] + "\n")  # damage in the middle
    with pytest.raises(ResultFormatError, match="transfers.jsonl:1"):
        read_run(store.folder)


def test_run_ids_sort_by_time() -> None:
    import datetime

    early = new_run_id(datetime.datetime(2024, 1, 1, 0, 0, tzinfo=datetime.UTC))
    late = new_run_id(datetime.datetime(2024, 1, 1, 0, 1, tzinfo=datetime.UTC))
    assert early < late and early.startswith("20240101T000000Z-") and len(early) == 23
