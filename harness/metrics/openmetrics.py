"""A finished run as an OpenMetrics file, ``results/<run-id>/metrics.om``, for backfilling:

    promtool tsdb create-blocks-from openmetrics results/<run-id>/metrics.om DATA_DIR

The file replays the live exporter's fold (``harness.metrics.series.MetricState``) over
run.json, transfers.jsonl and samples.jsonl in time order, and writes the value of every
series each event changed, timestamped (seconds) when the event happened: a transfer at its
``started_at + duration_s``, a sample at its ``t``. So the file has exactly the live names,
types and labels, and a dashboard works on a backfilled run as on a live one:
- ``xfrbench_transfer_duration_seconds`` is a histogram in both (cumulative buckets after
  each transfer), and ``xfrbench_transfer_last_duration_seconds`` a gauge in both: a
  per-transfer duration never appears under the histogram's name with another type.
- Throughput and bounds are bytes per second (Prometheus base unit; promtool rejects bits).
- ``xfrbench_run_info`` is repeated at least once a minute over the run's span so that
  instant queries inside the run see it (Prometheus looks back 5 minutes).
Within a series, points are strictly increasing in milliseconds (what the TSDB stores); two
events in the same millisecond keep the later value. A series gets a point only when an event
changes it (not at every would-be scrape), which keeps the file small; on a backfilled run a
``rate()`` over transfer counters needs a window that spans two points of a series. Every
transfer series gets a zero point when its case starts (as live, where the runner announces
each case), so a window over the case's start and its first transfer sees that transfer.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from prometheus_client.utils import floatToGoString

from harness.metrics.families import FAMILIES
from harness.metrics.series import HistogramValue, MetricState, SeriesKey, Value, transfer_time
from harness.results.access import write_text_atomic
from harness.results.folder import METRICS_OM, SAMPLES, read_run
from harness.results.meta import RunMeta
from harness.results.model import ResultFormatError, TransferRecord
from harness.results.resources import load_samples

RUN_INFO_EVERY_MS = 60_000
EXPECT, TRANSFER, SAMPLE = 0, 1, 2  # event kinds, in their order at one instant


def openmetrics_text(
    meta: RunMeta, records: list[TransferRecord], samples: list[dict[str, Any]]
) -> str:
    """The OpenMetrics exposition of a run (pure): every family once, timestamped points."""
    run_id = meta.run_id
    info_labels = (run_id, meta.scenario_name or "", meta.spec_hash or "")
    state = MetricState(*info_labels)
    events: list[tuple[float, int, int]] = [
        (transfer_time(r), TRANSFER, i) for i, r in enumerate(records)
    ] + [(_sample_time(s), SAMPLE, i) for i, s in enumerate(samples)]
    # Each transfer series starts at zero when its case starts, as the live exporter's does
    # when the runner announces the case: rate() and increase() then see the first transfer.
    begins: dict[str, float] = {}
    for t, kind, index in events:
        case = records[index].case if kind == TRANSFER else samples[index].get("case")
        start = records[index].started_at if kind == TRANSFER else t
        if isinstance(case, str):
            begins[case] = min(begins.get(case, start), start)
    events += [(begins[r.case], EXPECT, i) for i, r in enumerate(records)]
    events.sort()
    history: dict[SeriesKey, list[tuple[int, Value]]] = {}
    for t, kind, index in events:
        if kind == EXPECT:
            changed = state.expect_record(records[index])
        elif kind == TRANSFER:
            changed = state.add_transfer(records[index])
        else:
            try:
                changed = state.add_sample(samples[index])
            except ValueError as exc:
                raise ResultFormatError(f"sample {index + 1}: {exc}") from None
        ms = round(t * 1000)
        for key in dict.fromkeys(changed):  # once per key, in order
            value = state.values[key]
            point = (ms, value.copy() if isinstance(value, HistogramValue) else value)
            points = history.setdefault(key, [])
            if points and points[-1][0] >= ms:
                points[-1] = point  # same millisecond: the later value wins
            else:
                points.append(point)
    info_key: SeriesKey = ("xfrbench_run_info", info_labels)
    history[info_key] = [(ms, 1.0) for ms in _info_times([round(t * 1000) for t, _, _ in events])]
    if not history[info_key]:
        started = _started_ms(meta)
        history[info_key] = [(started, 1.0)] if started is not None else []
    return _render(history)


def _sample_time(sample: dict[str, Any]) -> float:
    t = sample.get("t")
    if not isinstance(t, int | float) or isinstance(t, bool):
        raise ResultFormatError(f"sample without a time t: {sample!r}")
    return float(t)


def _info_times(times_ms: list[int]) -> list[int]:
    """First and last event time, and enough between that no gap exceeds a minute."""
    if not times_ms:
        return []
    picked = [times_ms[0]]
    for ms in times_ms:
        if ms - picked[-1] >= RUN_INFO_EVERY_MS:
            picked.append(ms)
    if times_ms[-1] > picked[-1]:
        picked.append(times_ms[-1])
    return picked


def _started_ms(meta: RunMeta) -> int | None:
    try:
        started = datetime.datetime.fromisoformat(str(meta.started))
    except ValueError:
        return None
    return round(started.timestamp() * 1000)


def _render(history: dict[SeriesKey, list[tuple[int, Value]]]) -> str:
    by_family: dict[str, list[tuple[tuple[str, ...], list[tuple[int, Value]]]]] = {}
    for (name, labels), points in history.items():
        if points:
            by_family.setdefault(name, []).append((labels, points))
    out: list[str] = []
    for family in FAMILIES:
        series = by_family.get(family.name)
        if not series:
            continue
        out.append(f"# TYPE {family.name} {family.kind}")
        if family.unit:
            out.append(f"# UNIT {family.name} {family.unit}")
        out.append(f"# HELP {family.name} {_escape(family.help)}")
        for labels, points in sorted(series):
            pairs = list(zip(family.labels, labels, strict=True))
            for ms, value in points:
                ts = _timestamp(ms)
                if isinstance(value, HistogramValue):
                    for le, count in value.cumulative():
                        bucket = _labels([*pairs, ("le", le)])
                        out.append(f"{family.name}_bucket{bucket} {count} {ts}")
                    out.append(f"{family.name}_count{_labels(pairs)} {value.count} {ts}")
                    out.append(f"{family.name}_sum{_labels(pairs)} {_number(value.sum)} {ts}")
                else:
                    suffix = "_total" if family.kind == "counter" else ""
                    out.append(f"{family.name}{suffix}{_labels(pairs)} {_number(value)} {ts}")
    out.append("# EOF")
    return "\n".join(out) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs) + "}"


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else floatToGoString(value)


def _timestamp(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return f"{seconds}.{millis:03d}"


def write_openmetrics(run_dir: Path) -> Path:
    """Write ``run_dir/metrics.om`` from the run's files; returns its path."""
    folder = Path(run_dir)
    meta, records = read_run(folder)
    text = openmetrics_text(meta, records, load_samples(folder / SAMPLES))
    target = folder / METRICS_OM
    write_text_atomic(target, text)  # 0644, and the run folder's owner once handed over
    return target
