"""Per-case resource summary of samples.jsonl (summary["resources"][case]), pure.

Counters (CPU seconds, retransmits, link packets) are summed over consecutive samples rather
than taken as last minus first, as Prometheus' increase() does: a counter that starts again
from zero (a restarted server has a new pid and a new cgroup; a rebuilt namespace has new
TCP counters) adds its new value, so a figure never comes out negative and a restart in the
middle of a case loses nothing but what was spent between the last sample before and the
restart.

Memory is two figures, named for what they are (``MEMORY_NOTE``): ``anon_peak_bytes``, the
highest anonymous memory sampled during the case (its own samples only, so the cases that
share a testbed's servers each have theirs), and ``charged_peak_bytes``, the kernel's peak
of all the memory charged to the server's cgroup, page cache included, since the server
started (the same for every case its servers served). A summary.json written before holds
``peak_rss_bytes``, the larger of the two: readers take it as the charged figure.

Those are one value per case. What a comparison tests is one value per transfer
(``per_transfer``): CPU and memory between each transfer's start and end marks, and what it
left in the TCP tables, read from the records (``extra["sockets"]``, measure/watch.py);
the summary keeps their medians. The namespace's TIME_WAIT count is no transfer's figure:
its peak is kept per case as ``namespace_time_wait_peak``, labelled for what it is.
"""

from __future__ import annotations

import itertools
import json
import statistics
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.core.errors import UserInputError
from harness.core.terms import ROLES, SERVER_TO_SERVER
from harness.results.model import TransferRecord

Sample = dict[str, Any]
SERVER_ROLES = ROLES  # the report shows the servers' roles in this order

MEMORY_NOTE = (
    "Memory: anon peak is the highest anonymous memory (the server's own heap, not files it "
    "read) sampled, per transfer from its start to its end (the median over transfers) and "
    "in the case (one value, reported, not compared); charged peak is everything the kernel "
    "charged to the server's cgroup, page cache included, at its highest: per transfer "
    "where the kernel lets the peak be reset at each start, else only since the server "
    "started, so cases that share servers show the same one."
)
SOCKETS_NOTE = (
    "Sockets: connections and TIME_WAIT left per transfer are what each transfer opened and "
    "left on its own pair of addresses (the primary's and its secondary's; median over "
    "transfers); the harness's own connections (its read-back of each copy, the primary "
    "check, updates) are counted apart. The namespace's TIME_WAIT peak counts every socket "
    "of the server's namespace from the last 60 s, the harness's included: the port "
    "cliff's figure, no transfer's."
)
# Server-line keys of samples written before the memory figures were named for what they
# are, and their names now; a /proc line's old figures (VmRSS, VmHWM) were neither.
_OLD_MEMORY_KEYS = {
    "rss_bytes": "anon_bytes",
    "memory_bytes": "charged_bytes",
    "peak_rss_bytes": "charged_peak_bytes",
}


def load_samples(path: Path) -> list[Sample]:
    """All lines of a samples.jsonl; a truncated last line (a run killed mid-write) is
    dropped, a broken line elsewhere is an error. A missing file is no samples."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    samples: list[Sample] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise UserInputError(
                f"line {number} is not JSON",
                file=path,
                fix="the samples file is damaged; re-run the scenario",
            ) from None
        if not isinstance(value, dict):
            raise UserInputError(f"line {number} is not a JSON object", file=path)
        samples.append(upgrade_sample(value))
    return samples


def upgrade_sample(sample: Sample) -> Sample:
    """A server line from before the memory figures were renamed, with today's keys:
    cgroup figures keep their values under their new names; a /proc line's VmRSS and VmHWM
    (resident file pages included) become no figure rather than a wrong one."""
    if not any(key in sample for key in _OLD_MEMORY_KEYS):
        return sample
    from_cgroup = str(sample.get("source", "")).startswith("cgroup")
    for old, new in _OLD_MEMORY_KEYS.items():
        value = sample.pop(old, None)
        sample.setdefault(new, value if from_cgroup else None)
    return sample


def _same_process(a: Sample, b: Sample) -> bool:
    # A restarted server is a new process with a new cgroup: its counters start at zero.
    return a.get("pid") == b.get("pid") and a.get("source") == b.get("source")


def _always(a: Sample, b: Sample) -> bool:
    return True


def _cpu(sample: Sample) -> float:
    return float(sample["cpu_user_s"]) + float(sample["cpu_system_s"])


# The step a line's CPU seconds move in, for lines from before they said it: /proc's clock
# tick (USER_HZ is 100 on every Linux architecture the harness runs on), a cgroup's µs.
PROC_TICK_S = 0.01
CGROUP_RESOLUTION_S = 1e-6


def cpu_resolution_s(sample: Sample) -> float:
    """What the sample's CPU seconds move by (its cpu_resolution_s, else by its source)."""
    stated = sample.get("cpu_resolution_s")
    if isinstance(stated, int | float) and not isinstance(stated, bool) and stated > 0:
        return float(stated)
    return PROC_TICK_S if sample.get("source") == "proc" else CGROUP_RESOLUTION_S


def counter_delta(
    samples: list[Sample],
    value: Callable[[Sample], float],
    continuous: Callable[[Sample, Sample], bool] = _always,
) -> float:
    """Increase of a cumulative counter over time-ordered samples, across resets: where it
    went down, or `continuous` says a new counter began, the new value counts from zero."""
    total = 0.0
    for a, b in itertools.pairwise(samples):
        now = value(b)
        step = now - value(a)
        total += step if step >= 0 and continuous(a, b) else now
    return total


def _transfer_cpu(samples: list[Sample]) -> list[tuple[float, float]]:
    """(user, system) CPU seconds of each transfer, from its start and end marks."""
    starts: dict[Any, Sample] = {}
    ends: dict[Any, Sample] = {}
    for sample in samples:
        if sample.get("event") == "transfer-start":
            starts.setdefault(sample.get("repeat"), sample)  # the first start
        elif sample.get("event") == "transfer-end":
            ends[sample.get("repeat")] = sample  # the last end
    out = []
    for repeat, start in starts.items():
        end = ends.get(repeat)
        if end is None or end["t"] < start["t"] or not _same_process(start, end):
            continue
        user = float(end["cpu_user_s"]) - float(start["cpu_user_s"])
        system = float(end["cpu_system_s"]) - float(start["cpu_system_s"])
        if user >= 0 and system >= 0:
            out.append((user, system))
    return out


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 6) if values else None


def _peak(samples: list[Sample], key: str) -> int | None:
    values = [int(s[key]) for s in samples if isinstance(s.get(key), int | float)]
    return max(values) if values else None


def _median_int(values: list[float]) -> int | None:
    return round(statistics.median(values)) if values else None


def _role_summary(samples: list[Sample]) -> dict[str, Any]:
    per = _transfer_cpu(samples)
    windows = [_sampled(window) for window in _windows(samples)]
    return {
        "cpu_s_per_transfer": {
            "user": _median([u for u, _ in per]),
            "system": _median([s for _, s in per]),
            "total": _median([u + s for u, s in per]),
        },
        "cpu_s_total": round(counter_delta(samples, _cpu, _same_process), 6),
        "cpu_resolution_s": max(cpu_resolution_s(s) for s in samples),
        "anon_peak_bytes": _peak(samples, "anon_bytes"),
        "charged_peak_bytes": _peak(samples, "charged_peak_bytes"),
        "memory_peak_per_transfer_bytes": _median_int(
            [w["memory_peak"] for w in windows if w["memory_peak"] is not None]
        ),
        "charged_peak_per_transfer_bytes": _median_int(
            [w["charged_peak"] for w in windows if w["charged_peak"] is not None]
        ),
        "namespace_time_wait_peak": max(_time_wait_of(s) for s in samples),
        "peak_ephemeral_ports": max(int(s.get("ephemeral_ports_in_use", 0)) for s in samples),
        "retrans_segs": int(counter_delta(samples, lambda s: int(s["retrans_segs"]))),
        "tcp_timeouts": int(counter_delta(samples, lambda s: int(s["tcp_timeouts"]))),
    }


def _time_wait_of(sample: Sample) -> int:
    return int((sample.get("tcp") or {}).get("time_wait", 0))


def _is_server(sample: Sample) -> bool:
    return sample.get("role") != "link" and "cpu_user_s" in sample and "error" not in sample


def _host(sample: Sample) -> str:
    """Whose figures a server line adds to: its host; lines from before fleets name none,
    and their role is their host ("primary", "secondary")."""
    return str(sample.get("host") or sample["role"])


def _link_name(sample: Sample) -> str:
    """A link line's direction as transfers.jsonl names it: "forward" for a lone
    secondary's link, "<host> forward" for a fleet secondary's or the uplink's."""
    host = sample.get("host")
    return f"{host} {sample['direction']}" if host else str(sample["direction"])


def summarize_resources(
    samples: Iterable[Sample], records: Iterable[TransferRecord] = ()
) -> dict[str, dict[str, Any]]:
    """{case: {host: figures, "link": {direction: {passed, dropped}}}}; see the contract.

    A 1+1 case's hosts are "primary" and "secondary" (its roles, as before fleets); a
    fleet's secondaries are each their own host ("seoul-1"), with their "role" and "site"
    among their figures: several processes' counters never add up under one key. Link
    directions are named as in transfers.jsonl ("forward", "seoul-1 forward", "uplink
    forward").

    Per transfer, the median over the case's transfers (None without any): CPU between a
    transfer's start and end marks (cpu_s_per_transfer), and per_transfer()'s figures:
    memory_peak_per_transfer_bytes, charged_peak_per_transfer_bytes and, from `records`,
    connections_per_transfer, time_wait_left_per_transfer and
    harness_connections_per_transfer (a primary's over all its pairs' records).
    Per case, one value each: anon_peak_bytes, the highest anonymous memory sampled in the
    case; charged_peak_bytes, the kernel's peak of the group's charged memory since the
    server started (see the module; None where not sampled); namespace_time_wait_peak,
    the most TIME_WAIT sockets the server's whole namespace held (every transfer's of the
    last 60 s and the harness's: the port cliff's figure, no transfer's); the rest are
    peaks or counter deltas over the case's samples. A summary written before holds the
    namespace's peak as peak_time_wait.
    """
    primary_of: dict[str, str] = {}  # case -> its primary's host
    cases: dict[str, list[Sample]] = {}
    for sample in samples:
        if "error" in sample or "case" not in sample or "t" not in sample:
            continue
        cases.setdefault(sample["case"], []).append(sample)
    out: dict[str, dict[str, Any]] = {}
    for case, lines in cases.items():
        lines.sort(key=lambda s: s["t"])
        result: dict[str, Any] = {}
        by_host: dict[str, list[Sample]] = {}
        for sample in lines:
            if _is_server(sample):
                by_host.setdefault(_host(sample), []).append(sample)
        rank = {role: i for i, role in enumerate(SERVER_ROLES)}
        for host in sorted(by_host, key=lambda h: (rank.get(by_host[h][0]["role"], 9), h)):
            mine = by_host[host]
            figures = _role_summary(mine)
            if mine[0]["role"] == "primary":
                primary_of[case] = host
            if host != mine[0]["role"]:
                figures |= {"role": mine[0]["role"], "site": str(mine[0].get("site") or "")}
            result[host] = figures
        link: dict[str, dict[str, int]] = {}
        by_link: dict[str, list[Sample]] = {}
        for sample in lines:
            if sample.get("role") == "link" and sample.get("direction"):
                by_link.setdefault(_link_name(sample), []).append(sample)
        for name, steps in sorted(by_link.items()):
            link[name] = {
                key: int(counter_delta(steps, lambda s, k=key: int(s[k])))
                for key in ("passed", "dropped")
            }
        result["link"] = link
        out[case] = result
    sockets = socket_values(
        records,
        lambda record, role: (record.case, primary_of.get(record.case) or "")
        if role == "primary"
        else (record.case, record.host),
    )
    for case, result in out.items():
        for host, figures in result.items():
            if host == "link":
                continue
            counted = sockets.get((case, host), {})
            for key in SOCKETS:
                figures[f"{key}_per_transfer"] = _median(counted.get(key, []))
    return out


# --- what compare tests: each transfer's figures, and the one memory peak per case ---------

MEMORY_PEAK = "anon_peak_bytes"  # the summary key that holds a server's memory peak


def peak_memory_bytes(figures: dict[str, Any]) -> int | None:
    """A server's memory peak in a case, from its summary["resources"] figures: the one
    place that names the key (compare reads memory through it). One value per case and
    run: reported, not tested (per_transfer's ``memory_peak`` is the tested figure)."""
    value = figures.get(MEMORY_PEAK)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# per_transfer()'s figures from samples.jsonl (one per pair of marks) and from the records'
# extra["sockets"] (one per server-to-server record that has it), and where each comes from.
SAMPLED = ("cpu_s", "memory_peak", "charged_peak", "cpu_resolution")
SOCKETS = ("connections", "time_wait_left", "harness_connections")


def _windows(lines: list[Sample]) -> Iterator[tuple[Sample, Sample, list[Sample]]]:
    """(start mark, end mark, the lines from one to the other, both included) of each
    transfer of one server, in order; a window across a restart (another process) is left
    out. A repeat's client pulls are transfers of their own (their marks come after)."""
    starts: dict[Any, int] = {}
    for index, sample in enumerate(lines):
        event = sample.get("event")
        if event == "transfer-start":
            starts.setdefault(sample.get("repeat"), index)
        elif event == "transfer-end" and sample.get("repeat") in starts:
            first = starts.pop(sample.get("repeat"))
            start = lines[first]
            if _same_process(start, sample):
                yield start, sample, lines[first : index + 1]


def _sampled(window: tuple[Sample, Sample, list[Sample]]) -> dict[str, float | None]:
    start, end, during = window
    cpu = _cpu(end) - _cpu(start)
    charged = end.get("transfer_charged_peak_bytes")
    return {
        "cpu_s": round(cpu, 6) if cpu >= 0 else None,
        "memory_peak": _peak(during, "anon_bytes"),
        "charged_peak": charged if isinstance(charged, int) else None,
        # A difference of two readings in steps of r is off by up to r.
        "cpu_resolution": max(cpu_resolution_s(start), cpu_resolution_s(end)),
    }


def _servers_by_host(samples: Iterable[Sample]) -> dict[tuple[str, str], list[Sample]]:
    by_host: dict[tuple[str, str], list[Sample]] = {}
    for sample in samples:
        if "case" in sample and "t" in sample and _is_server(sample):
            by_host.setdefault((sample["case"], _host(sample)), []).append(sample)
    for lines in by_host.values():
        lines.sort(key=lambda s: s["t"])
    return by_host


def record_sockets(records: Iterable[TransferRecord]) -> Iterator[tuple[TransferRecord, dict]]:
    """Each server-to-server record with its extra["sockets"] (measure/watch.py), in the
    order the transfers ran; records without them (failed before the observation, a remote
    run, a run from before) are left out."""
    for record in records:
        sockets = record.extra.get("sockets") if record.method == SERVER_TO_SERVER else None
        if isinstance(sockets, dict) and "error" not in sockets:
            yield record, sockets


def socket_figures(sockets: dict[str, Any], role: str) -> dict[str, int] | None:
    """One role's per-transfer socket figures from a record's extra["sockets"]: the
    connections it opened on its pair, its TIME_WAIT sockets left there, and the harness's
    own connections in its namespace (counted apart). None when the record has none."""
    side = sockets.get(role)
    harness = (sockets.get("harness") or {}).get(role) or {}
    if not isinstance(side, dict):
        return None
    return {
        "connections": int(side.get("connections", 0)),
        "time_wait_left": int(side.get("time_wait_left", 0)),
        "harness_connections": int(harness.get("connections", 0)),
    }


def socket_values(
    records: Iterable[TransferRecord], place: Callable[[TransferRecord, str], tuple[str, str]]
) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Each role's socket_figures of every record that has them, in the records' order,
    pooled under `place`(record, role) (a case and a host, or a case and a role)."""
    pooled: dict[tuple[str, str], dict[str, list[float]]] = {}
    for record, sockets in record_sockets(records):
        for role in SERVER_ROLES:
            found = socket_figures(sockets, role)
            if found is not None:
                mine = pooled.setdefault(place(record, role), {k: [] for k in SOCKETS})
                for key, count in found.items():
                    mine[key].append(count)
    return pooled


def per_transfer(
    samples: Iterable[Sample], records: Iterable[TransferRecord] = ()
) -> dict[str, dict[str, dict[str, list[float]]]]:
    """{case: {role: {figure: [one value per transfer, in the order they ran]}}}: what
    compare tests, transfer by transfer. A fleet's secondaries are pooled under their role
    (the samples' figures host after host, the records' in the records' order). Every
    role present has every key below, possibly an empty list.

    From samples.jsonl, one value per transfer's start and end marks (a server's lines):
    - ``cpu_s``: CPU seconds (user + system) from the start mark to the end mark;
    - ``memory_peak``: bytes, the highest anonymous memory (anon_bytes) sampled from the
      start mark to the end mark, both included: the same meaning on every host;
    - ``charged_peak``: bytes, the most memory charged to the server's cgroup (page cache
      included) from the start mark to the end mark, the kernel's own peak reset at the
      start mark (transfer_charged_peak_bytes); only where the kernel allows the reset
      (cgroup v1, or v2 on Linux 6.12+), else no value;
    - ``cpu_resolution``: seconds, the step ``cpu_s`` moves in (1e-6 from a cgroup, a
      10 ms clock tick from /proc, where an agent or a host could make no cgroup).
    From the records' extra["sockets"] (`records`: transfers.jsonl; none given, none of
    these), one value per server-to-server record that has them, for each side of its
    pair (the primary, the secondary):
    - ``connections``: connections that side opened on its pair (distinct source ports);
    - ``time_wait_left``: TIME_WAIT sockets that transfer left on its pair in that side's
      namespace;
    - ``harness_connections``: the harness's own connections in that side's namespace
      (read-back, primary check, updates), counted apart: never in the two above.
    The namespace's TIME_WAIT count (samples' tcp.time_wait) is no transfer's figure: it
    holds every socket of the last 60 s; its peak is the summary's namespace_time_wait_peak.
    """
    out: dict[str, dict[str, dict[str, list[float]]]] = {}

    def figures(case: str, role: str) -> dict[str, list[float]]:
        return out.setdefault(case, {}).setdefault(role, {k: [] for k in SAMPLED + SOCKETS})

    for (case, _host_name), lines in _servers_by_host(samples).items():
        mine = figures(case, str(lines[0]["role"]))
        for window in _windows(lines):
            values = _sampled(window)
            if values["cpu_s"] is None:
                continue
            for key, value in values.items():
                if value is not None:
                    mine[key].append(value)
    for (case, role), values in socket_values(records, lambda r, role: (r.case, role)).items():
        mine = figures(case, role)
        for key, counts in values.items():
            mine[key].extend(counts)
    return out
