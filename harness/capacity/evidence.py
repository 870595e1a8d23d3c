"""What bound a capacity search, read from its steps' run folders (pure over a RunFolder).

Each candidate limit gets one reading per step: how close the step came to it (`closeness`,
0 to 1 of the limit; None where it cannot be told here) and a `level` that grows with the
pressure on it (refusals counted, a CPU share), in the run's own figures:

- quota: the primary's transfer quota (its dialect's, BIND transfers-out 10 by default) and
  the refusals its log holds in its own words (servers/refusals.py): any is being at it;
- primary CPU and servers' CPU: the highest share of the host's cores the primary, and all
  servers together, used between two samples of their cgroups;
- harness CPU: the driver's own CPU over the run's wall time (run.json), against one core;
  on a host of 2 or 3 cores it shares the servers' cores (run.json cpus), so it is said;
- ports: the most ephemeral ports a host had in use (TIME_WAIT included) against its
  ip_local_port_range, and the connects its servers logged failing for want of one
  ("address not available"): a range in full use is not yet a range run out, and a step
  just below the cliff may use every port and still pass;
- link: the highest rate the primary sent (or a site received) against the rate set;
- retry timer: secondaries that logged a retry (their own words) and never served in the
  repeat: they wait out their timer (the zone's SOA retry) past the timeout;
- NOTIFY pacing: how long after the first NOTIFY the last left, against the SLA's time.

`binding` names the one the first failing step came closest to, at 80 % or more, that
moved with the load (its level higher than at the last passing step); or none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

from harness.capacity.sla import Sla
from harness.core import fmt
from harness.results.fleet import fleet_repeats
from harness.results.folder import RunFolder
from harness.results.model import TransferRecord
from harness.servers import DIALECTS, count_refusals

CLOSE = 0.8  # a limit this near binds (when it moved with the load)
MOVED = 1.1  # ...and its level at the first fail is this much above the last pass's
MIN_INTERVAL_S = 0.5  # CPU and byte rates over sample gaps shorter than this are noise
DEFAULT_PORT_RANGE = "32768 60999"  # Linux's ip_local_port_range
NO_PORT = "Cannot assign requested address"  # EADDRNOTAVAIL in a read-back's error
# The SOA retry of the generated zones (zonegen/tld.py, small.py): a refused secondary's timer.
SOA_RETRY_S = {"tld": 300, "tiny": 300, "hosting": 3600}


@dataclass(frozen=True)
class Reading:
    candidate: str  # quota, primary-cpu, servers-cpu, harness-cpu, ports, link, retry, notify
    title: str  # "BIND transfers-out 2"
    closeness: float | None  # 0..1 of the limit; None: cannot be told from this run
    level: float  # grows with the pressure on it
    text: str  # "14 refusals logged"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cores(run: RunFolder) -> int:
    return int(run.meta.host.cpu_count or 1)


def _scenario(run: RunFolder) -> dict[str, Any]:
    return run.cases[0].scenario if run.cases else {}


def _rates(samples: Sequence[dict[str, Any]], field: str) -> dict[str, list[tuple[float, float]]]:
    """Per host, (time, rate) of a cumulative `field` (a callable's sum for CPU) between
    its periodic samples of one process."""
    by_host: dict[str, list[dict[str, Any]]] = {}
    for sample in samples:
        if sample.get("host") and sample.get("role") in {"primary", "secondary"}:
            by_host.setdefault(str(sample["host"]), []).append(sample)
    out: dict[str, list[tuple[float, float]]] = {}
    for host, lines in by_host.items():
        lines.sort(key=lambda s: float(s.get("t", 0.0)))
        rates = []
        for before, after in pairwise(lines):
            gap = float(after["t"]) - float(before["t"])
            if gap < MIN_INTERVAL_S or before.get("pid") != after.get("pid"):
                continue
            delta = _value(after, field) - _value(before, field)
            if delta >= 0:
                rates.append((float(after["t"]), delta / gap))
        out[host] = rates
    return out


def _value(sample: dict[str, Any], field: str) -> float:
    if field == "cpu":
        return float(sample.get("cpu_user_s", 0.0)) + float(sample.get("cpu_system_s", 0.0))
    return float(sample.get(field, 0.0))


def _role_hosts(run: RunFolder, role: str) -> set[str]:
    return {str(s["host"]) for s in run.samples or [] if s.get("role") == role and s.get("host")}


def quota(run: RunFolder) -> Reading:
    kind = run.records[0].primary_kind if run.records else ""
    dialect = DIALECTS.get(kind)
    title = dialect.title if dialect else kind
    if dialect is None or dialect.transfer_quota is None:
        return Reading("quota", f"{title} transfer quota", None, 0.0, f"{title} has none")
    option, default = dialect.transfer_quota
    options = (_scenario(run).get("servers", {}).get("primary") or {}).get("options") or {}
    limit = int(options.get(option, default))
    counts = [r.refusals for r in fleet_repeats(run.records)]
    if dialect.refusals is None or any(c is None for c in counts):
        return Reading("quota", f"{title} {option} {limit}", None, 0.0, "refusals not logged")
    in_repeats = sum(int(c or 0) for c in counts)
    # The whole log too: a fleet's first copies, before the repeats, meet the quota first
    # (all its secondaries start at once), and a secondary refused then is missing from
    # every repeat while the repeats' own windows hold no refusal.
    whole = sum(
        count_refusals(kind, log.read_text(errors="replace"), 0.0).refusals or 0
        for log in sorted(run.path.glob(f"cases/*/primary/{dialect.log_name}"))
    )
    refused = max(whole, in_repeats)
    text = f"{refused:,} refusals logged" if refused else "no refusal logged"
    if refused > in_repeats:
        before = "all" if not in_repeats else f"{refused - in_repeats:,}"
        text += f", {before} before the measured repeats"
    return Reading("quota", f"{title} {option} {limit}", 1.0 if refused else 0.0, refused, text)


def cpu(run: RunFolder) -> list[Reading]:
    samples = [s for s in run.samples or [] if s.get("event") == "periodic"]
    rates = _rates(samples, "cpu")
    cores = _cores(run)
    primary = _role_hosts(run, "primary")
    peak_primary = max((r for h in primary for _, r in rates.get(h, [])), default=None)
    together: dict[float, float] = {}
    for series in rates.values():
        for t, rate in series:
            together[t] = together.get(t, 0.0) + rate
    peak_all = max(together.values(), default=None)
    readings = []
    for name, title, peak in (
        ("primary-cpu", "primary's CPU", peak_primary),
        ("servers-cpu", "all servers' CPU", peak_all),
    ):
        if peak is None:
            readings.append(Reading(name, title, None, 0.0, "not sampled"))
            continue
        readings.append(
            Reading(name, title, min(1.0, peak / cores), peak, f"peak {peak:.2f} of {cores} cores")
        )
    driver = (run.meta.cpu or {}).get("driver_share_of_wall")
    shared = (run.meta.cpus or {}).get("isolation") == "shared"
    note = f"; on this {cores}-core host it shares the servers' cores" if shared else ""
    if driver is None:
        readings.append(Reading("harness-cpu", "harness's own CPU", None, 0.0, "not recorded"))
    else:
        share = float(driver)
        readings.append(
            Reading(
                "harness-cpu",
                "harness's own CPU",
                min(1.0, share),
                share,
                f"{share:.0%} of a core over the run{note}",
            )
        )
    return readings


def _port_count(text: str) -> int:
    """Ports in an ip_local_port_range value ("32768 60999"); Linux's default when unread."""
    try:
        low, high = (int(x) for x in str(text).split()[:2])
    except ValueError:
        low, high = (int(x) for x in DEFAULT_PORT_RANGE.split())
    return max(1, high - low + 1)


def ports(run: RunFolder) -> Reading:
    ranges: dict[str, int] = {}
    for case in run.cases:
        for host, facts in (case.testbed.get("hosts") or {}).items():
            sysctls = facts.get("sysctls") or {}
            ranges[host] = _port_count(
                sysctls.get("net.ipv4.ip_local_port_range", DEFAULT_PORT_RANGE)
            )
    best: tuple[float, str] | None = None
    for sample in run.samples or []:
        host = sample.get("host")
        used = sample.get("ephemeral_ports_in_use")
        if not host or not isinstance(used, int):
            continue
        size = ranges.get(str(host), _port_count(DEFAULT_PORT_RANGE))
        time_wait = int((sample.get("tcp") or {}).get("time_wait", 0))
        share = used / size
        if best is None or share > best[0]:
            best = (share, f"{host}: {used:,} of {size:,} ports in use ({time_wait:,} TIME_WAIT)")
    failed = _failed_connects(run)
    # The harness reads a cold start's copies back inside the secondary's namespace: with
    # every port held by the server's TIME_WAIT (BIND binds them, so no other connect may
    # share one) its read-back is refused too, and the transfers go unverified.
    harness = sum(1 for r in run.records if r.repeat >= 1 and NO_PORT in (r.error or ""))
    if best is None and not failed and not harness:
        return Reading("ports", "ephemeral ports", None, 0.0, "not sampled")
    share, text = best or (0.0, "ports in use not sampled")
    if not failed and not harness:
        return Reading("ports", "ephemeral ports", min(1.0, share), share, text)
    # Ran out: any failed connect is being at the limit, and its level ranks above any
    # share of the range, so a step that used every port and passed is below it.
    if failed:
        text += f"; {failed:,} connects failed: address not available"
    if harness:
        text += "; the harness's read-back of the copies found no free port"
    return Reading("ports", "ephemeral ports", 1.0, 1.0 + failed + harness, text)


def _failed_connects(run: RunFolder) -> int:
    """Connects the secondaries logged failing for want of a local port (EADDRNOTAVAIL),
    in their own words (servers/failures.py), over the measured repeats."""
    failed = 0
    for record in run.records:
        if record.repeat >= 1:
            failed += int(_secondary_failures(record).get("address_not_available") or 0)
    return failed


def _secondary_failures(record: TransferRecord) -> dict[str, Any]:
    """The failures its secondary logged in the repeat; for one that never got its first
    copy, those since its start (extra.missing)."""
    counts = (record.server_logged or {}).get("secondary_failures") or {}
    return (record.extra.get("missing") or {}).get("secondary_failures") or counts


def _rate(link: dict[str, Any] | None, direction: str) -> int | None:
    value = ((link or {}).get(direction) or {}).get("rate")
    return int(value) if value else None


def link(run: RunFolder) -> Reading:
    scenario = _scenario(run)
    samples = [s for s in run.samples or [] if s.get("event") == "periodic"]
    limits: list[tuple[float, str]] = []
    uplink = _rate(scenario.get("uplink"), "forward")
    if uplink:
        sent = _rates([s for s in samples if s.get("role") == "primary"], "net_tx_bytes")
        peak = max((r * 8 for series in sent.values() for _, r in series), default=0.0)
        limits.append((peak / uplink, f"primary sent {fmt.rate(peak)} of {fmt.rate(uplink)}"))
    for site in scenario.get("secondaries") or []:
        rate = _rate(site.get("link"), "forward")
        if not rate:
            continue
        got = _rates([s for s in samples if s.get("site") == site.get("name")], "net_rx_bytes")
        peak = max((r * 8 for series in got.values() for _, r in series), default=0.0)
        limits.append((peak / rate, f"{site.get('name')} got {fmt.rate(peak)} of {fmt.rate(rate)}"))
    if not limits:
        return Reading("link", "link bandwidth", None, 0.0, "no rate set")
    share, text = max(limits)
    return Reading("link", "link bandwidth", min(1.0, share), share, text)


def retry(run: RunFolder) -> Reading:
    repeats = fleet_repeats(run.records)
    fleet = max((r.secondaries for r in repeats), default=0)
    waiting = 0
    kinds: set[str] = set()
    for record in run.records:
        counts = _secondary_failures(record)
        if record.repeat >= 1 and not record.counts and int(counts.get("retry") or 0) > 0:
            waiting += 1
            kinds.add(str(counts.get("server") or record.secondary_kind))
    if not fleet:
        return Reading("retry", "retry timer", None, 0.0, "no fleet")
    preset = str((_scenario(run).get("zones") or {}).get("preset", ""))
    timer = SOA_RETRY_S.get(preset)
    on = f" (the zone's SOA retry, {timer} s)" if timer else ""
    who = "/".join(sorted(DIALECTS[k].title if k in DIALECTS else k for k in kinds))
    per = waiting / (fleet * len(repeats))
    text = (
        f"{waiting} {who} secondaries logged a retry and never served: waiting on their timer{on}"
        if waiting
        else "no secondary waited on a retry"
    )
    return Reading("retry", "retry timer", 1.0 if waiting else 0.0, per, text)


def notify(run: RunFolder, sla: Sla) -> Reading:
    spreads = []
    for repeat in {r.repeat for r in run.records if r.repeat >= 1}:
        sent = [r.phases["notify_sent"] for r in run.records
                if r.repeat == repeat and "notify_sent" in r.phases]  # fmt: skip
        if len(sent) > 1:
            spreads.append(max(sent) - min(sent))
    if not spreads or sla.seconds is None:
        return Reading("notify", "NOTIFY pacing", None, 0.0, "no NOTIFY timeline")
    spread = max(spreads)
    share = spread / sla.seconds
    text = f"the last NOTIFY left {spread:.2f} s after the first ({share:.0%} of the SLA's time)"
    return Reading("notify", "NOTIFY pacing", min(1.0, share), spread, text)


def readings(run: RunFolder, sla: Sla) -> list[Reading]:
    """Every candidate's reading of one step, the quota first (ties go to the earlier)."""
    return [quota(run), retry(run), *cpu(run), ports(run), link(run), notify(run, sla)]


@dataclass(frozen=True)
class Line:
    """One candidate across the search: at the last pass and the first fail."""

    candidate: str
    title: str
    at_pass: Reading | None
    at_fail: Reading | None
    moved: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "title": self.title,
            "at_pass": self.at_pass.to_dict() if self.at_pass else None,
            "at_fail": self.at_fail.to_dict() if self.at_fail else None,
            "moved": self.moved,
        }


def lines(at_pass: list[Reading] | None, at_fail: list[Reading] | None) -> list[Line]:
    """The table: one line per candidate, from the two steps around the capacity."""
    passed = {r.candidate: r for r in at_pass or []}
    failed = {r.candidate: r for r in at_fail or []}
    out = []
    for name in dict.fromkeys([*failed, *passed]):
        low, high = passed.get(name), failed.get(name)
        shown = high or low
        assert shown is not None
        moved = (
            low is not None
            and high is not None
            and high.level > low.level * MOVED
            and high.level - low.level > 1e-3
        )
        out.append(Line(name, shown.title, low, high, moved))
    return out


def binding(table: list[Line]) -> Line | None:
    """The candidate the first failing step came closest to (at CLOSE or more) among those
    that moved with the load; the first of equals (the quota before its retries)."""
    best: Line | None = None
    for line in table:
        reading = line.at_fail
        if reading is None or reading.closeness is None or reading.closeness < CLOSE:
            continue
        if not line.moved and line.at_pass is not None:
            continue
        if best is None or reading.closeness > best.at_fail.closeness:  # type: ignore[union-attr]
            best = line
    return best
