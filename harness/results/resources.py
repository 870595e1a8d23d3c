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
"""

from __future__ import annotations

import itertools
import json
import statistics
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.core.errors import UserInputError
from harness.core.terms import ROLES

Sample = dict[str, Any]
SERVER_ROLES = ROLES  # the report shows the servers' roles in this order

MEMORY_NOTE = (
    "Memory: anon peak is the highest anonymous memory (the server's own heap, not files it "
    "read) sampled during the case; charged peak is everything the kernel charged to the "
    "server's cgroup, page cache included, at its highest since the server started, so "
    "cases that share servers show the same one."
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


def _role_summary(samples: list[Sample]) -> dict[str, Any]:
    per = _transfer_cpu(samples)
    return {
        "cpu_s_per_transfer": {
            "user": _median([u for u, _ in per]),
            "system": _median([s for _, s in per]),
            "total": _median([u + s for u, s in per]),
        },
        "cpu_s_total": round(counter_delta(samples, _cpu, _same_process), 6),
        "anon_peak_bytes": _peak(samples, "anon_bytes"),
        "charged_peak_bytes": _peak(samples, "charged_peak_bytes"),
        "peak_time_wait": max(int(s.get("tcp", {}).get("time_wait", 0)) for s in samples),
        "peak_ephemeral_ports": max(int(s.get("ephemeral_ports_in_use", 0)) for s in samples),
        "retrans_segs": int(counter_delta(samples, lambda s: int(s["retrans_segs"]))),
        "tcp_timeouts": int(counter_delta(samples, lambda s: int(s["tcp_timeouts"]))),
    }


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


def summarize_resources(samples: Iterable[Sample]) -> dict[str, dict[str, Any]]:
    """{case: {host: figures, "link": {direction: {passed, dropped}}}}; see the contract.

    A 1+1 case's hosts are "primary" and "secondary" (its roles, as before fleets); a
    fleet's secondaries are each their own host ("seoul-1"), with their "role" and "site"
    among their figures: several processes' counters never add up under one key. Link
    directions are named as in transfers.jsonl ("forward", "seoul-1 forward", "uplink
    forward").

    cpu_s_per_transfer is the median over transfers of the CPU used between a transfer's
    start and end marks (None without marks); anon_peak_bytes the highest anonymous memory
    sampled in the case, charged_peak_bytes the kernel's peak of the group's charged memory
    since the server started (see the module; None where not sampled); the rest are peaks
    or counter deltas over the case's samples.
    """
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
    return out


# --- what compare tests: each transfer's figures, and the one memory peak per case ---------

MEMORY_PEAK = "anon_peak_bytes"  # the summary key that holds a server's memory peak


def peak_memory_bytes(figures: dict[str, Any]) -> int | None:
    """A server's memory peak in a case, from its summary["resources"] figures: the one
    place that names the key (compare reads memory through it)."""
    value = figures.get(MEMORY_PEAK)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _time_wait_of(sample: Sample) -> int:
    return int((sample.get("tcp") or {}).get("time_wait", 0))


def per_transfer(samples: Iterable[Sample]) -> dict[str, dict[str, dict[str, list[float]]]]:
    """{case: {role: {"cpu_s": [...], "time_wait": [...]}}}: for each transfer, in the
    order the transfers ran, a server's CPU seconds between the transfer's start and end
    marks, and the most TIME_WAIT sockets it held from the start mark to the end mark.
    A fleet's secondaries are pooled under their role. The summary keeps only the median
    and the case's peak; a comparison of two runs tests these samples."""
    by_host: dict[tuple[str, str], list[Sample]] = {}
    for sample in samples:
        if "case" in sample and "t" in sample and _is_server(sample):
            by_host.setdefault((sample["case"], _host(sample)), []).append(sample)
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for (case, _host_name), lines in by_host.items():
        lines.sort(key=lambda s: s["t"])
        role = str(lines[0]["role"])
        figures = out.setdefault(case, {}).setdefault(role, {"cpu_s": [], "time_wait": []})
        starts: dict[Any, Sample] = {}
        for sample in lines:
            event = sample.get("event")
            if event == "transfer-start":
                starts.setdefault(sample.get("repeat"), sample)
            elif event == "transfer-end" and sample.get("repeat") in starts:
                start = starts.pop(sample.get("repeat"))
                if not _same_process(start, sample):
                    continue
                cpu = _cpu(sample) - _cpu(start)
                if cpu >= 0:
                    figures["cpu_s"].append(round(cpu, 6))
                during = [s for s in lines if start["t"] <= s["t"] <= sample["t"]]
                figures["time_wait"].append(max(_time_wait_of(s) for s in during))
    return out
