"""The report's model: every number the report shows, computed from a run folder's files.

``build_report_data`` is pure (run.json, records, summary.json, samples, case.json files in;
a ``ReportData`` of plain numbers out); ``load_report_data`` reads the files around it. The
renderers (figures, HTML, terminal) only format what is here, so tests check the numbers
once and the rendering separately.

Per-case duration figures come from ``harness.results.summary`` over transfers.jsonl (the
same code that writes summary.json; report/case_rows.py), so an interrupted run without
summary.json reports the same figures a finished one would. Resource figures come from
summary.json["resources"] when the run wrote it, else from samples.jsonl through
``harness.results.resources``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.core import fmt
from harness.core.fmt import short_labels
from harness.core.terms import ROLES, SERVER_TO_SERVER
from harness.link.describe import describe_direction, describe_link
from harness.report.case_rows import CaseRow, case_rows
from harness.report.coldview import ColdStartCase, cold_starts
from harness.report.faultview import FaultData, fault_data
from harness.report.fleetview import FleetData, fleet_data
from harness.report.labels import readable, readable_labels
from harness.report.link_checks import PathCheck, link_checks
from harness.report.logged_failures import (
    unlogged_note,
)
from harness.report.phases import CasePhases, case_phases
from harness.report.real_paths import RealPath, real_paths, under_links
from harness.report.resources_rows import CaseResources, case_resources
from harness.report.screen import FirstScreen, first_screen
from harness.report.streamview import StreamData, stream_data
from harness.report.throughput_bound import BoundRow, bound_rows
from harness.report.transport_costs import TransportGroup, transport_costs
from harness.results.catalog import catalog_summary
from harness.results.failures import FailureSummary, reason_text, summarize_failures
from harness.results.folder import (
    SAMPLES,
    SUMMARY_JSON,
    TRANSFERS,
    RunFolder,
    open_run,
)
from harness.results.meta import CaseMeta, RunMeta
from harness.results.model import FAILURE_WORDS
from harness.results.planning import run_plan_lines
from harness.results.resources import per_transfer, summarize_resources
from harness.results.summary import (
    case_label,
)
from harness.xfr.rrsum_native import digest_warning

SERVER_ROLES = ROLES  # the report shows the servers' roles in this order


@dataclass(frozen=True)
class ServerVersion:
    kind: str
    version: str | None
    path: str | None


@dataclass
class RunInfo:
    run_dir: str
    run_id: str
    scenario: str | None
    description: str | None
    scenario_path: str | None
    spec_hash: str | None
    started: str | None
    finished: str | None
    # "complete", "interrupted" (Ctrl-C, partial results kept) or "unfinished" (the writer
    # died: run.json never got its end time)
    state: str
    git_commit: str | None
    git_dirty: bool | None
    hostname: str | None
    os: str | None
    kernel: str | None
    cpu: str | None
    servers: list[ServerVersion]
    link_backend: str | None
    transfers: int
    # Whose cores the harness and the servers ran on (run.json cpus' reason), and the CPU
    # split in words; None for runs written before they were recorded.
    cpu_placement: str | None = None
    cpu_split: str | None = None
    # An operator's own zone, in words: origin, file, versions, records and type mix.
    zone: str | None = None

    @property
    def interrupted(self) -> bool:
        return self.state != "complete"


@dataclass
@dataclass
class FailedAttempt:
    """One attempt that does not count, for the report's list of them."""

    case: str  # with its method when a client pull
    repeat: int
    host: str
    kind: str  # FAILURE_WORDS of its failure
    reason: str
    number: int | None  # of its reason in FailureSummary.groups (1-based)


@dataclass(frozen=True)
class Labels:
    shared: str  # what every name has, as a pattern ("bind-bind/*"), for a caption
    short: dict[str, str]  # name -> what tells it apart

    def __call__(self, name: str) -> str:
        return self.short.get(name, name)


def _worded(shared: str, short: dict[str, str]) -> Labels:
    """The shortened names in words (report/labels.py): "tld 10 k · XoT · IXFR"."""
    return Labels(readable(shared), readable_labels(short))


@dataclass
class ReportData:
    run: RunInfo
    cases: list[CaseRow]
    resources: list[CaseResources]
    resources_source: str | None  # "summary.json" or "samples.jsonl"
    resources_note: str | None  # why there are none
    # role -> [(seconds since the first sample, TIME_WAIT sockets)]
    time_wait: dict[str, list[tuple[float, int]]]
    case_spans: list[tuple[str, float, float]]  # (case, first, last sample) of each stay
    samples_note: str | None  # why there is no time series
    warnings: list[str] = field(default_factory=list)
    # What `compare` could detect with this run's spread, and the repeats it would need
    # (results/planning.py): said under the transport table.
    compare_plan: list[str] = field(default_factory=list)
    # The first screen: transport_costs.py, phases.py, link_checks.py, throughput_bound.py
    transports: list[TransportGroup] = field(default_factory=list)
    phases: list[CasePhases] = field(default_factory=list)
    links: list[PathCheck] = field(default_factory=list)
    real_paths: list[RealPath] = field(default_factory=list)  # run --inventory: the paths found
    bounds: list[BoundRow] = field(default_factory=list)
    bounds_missing: list[tuple[str, str]] = field(default_factory=list)  # (case, why none)
    fleet: FleetData | None = None
    # case -> the fewest ephemeral ports of its secondaries (ip_local_port_range), and
    # whether they may reuse a port in TIME_WAIT (tcp_tw_reuse = 1): the TIME_WAIT limit
    port_ranges: dict[str, tuple[int, bool]] = field(default_factory=dict)
    failures: FailureSummary = field(default_factory=lambda: summarize_failures([]))
    failed_attempts: list[FailedAttempt] = field(default_factory=list)
    faults: FaultData | None = None  # a run whose cases broke something (faultview.py)
    stream: StreamData | None = None  # change streams (report/streamview.py)
    # Catalog zones: summary.json's "catalog" rows, from the records (results/catalog.py).
    catalog: list[dict[str, Any]] = field(default_factory=list)
    cold_starts: list[ColdStartCase] = field(default_factory=list)  # report/coldview.py

    @cached_property
    def screen(self) -> FirstScreen:
        """The first screen: this run's answer first, what does not apply named once."""
        return first_screen(self)

    @cached_property
    def labels(self) -> Labels:
        """Every case name of the report shortened once (core/fmt.py short_labels), so that a
        case reads the same in every table and figure."""
        names = [row.label for row in self.cases] + [x.label for x in self.phases]
        names += [x.label for x in self.bounds] + [x.case for x in self.links if x.cases == 1]
        names += [x.case for x in self.resources] + [case for case, _, _ in self.case_spans]
        names += [x.case for x in self.fleet.cases] if self.fleet else []
        names += [x.case for x in self.faults.cases] if self.faults else []
        names += [x.case for x in self.stream.cases] if self.stream else []
        names += [row["case"] for row in self.catalog]
        names += [x.case for x in self.cold_starts]
        return _worded(*short_labels(list(dict.fromkeys(names))))

    @cached_property
    def transport_labels(self) -> Labels:
        """The transport table's pair keys, shortened once."""
        return _worded(*short_labels([g.key for g in self.transports]))

    @property
    def whole_zone_notes(self) -> list[str]:
        """The IXFR cases whose transfers came as whole zones, for the first screen (their
        figures are AXFR times however the case is named), one line per fallback reason."""
        groups: dict[str, list[CaseRow]] = {}
        for row in self.cases:
            if row.whole_zones:
                kinds = ", ".join(kind for kind, _ in row.whole_zone_kinds)
                groups.setdefault(kinds, []).append(row)
        lines = []
        for kinds, rows in groups.items():
            names = ", ".join(self.labels(row.label) for row in rows)
            came = sum(row.whole_zones for row in rows)
            of = sum(row.ok for row in rows)
            lines.append(
                f"IXFR answered with whole zones, as the servers logged ({kinds}): {came} of "
                f"{of} transfers of {names}. Their times are AXFR times."
            )
        return lines

    @property
    def unlogged_failures_note(self) -> str | None:
        """What the secondaries' servers never log (so never count), said once for the run."""
        return unlogged_note(item for row in self.cases for item in row.logged_failures)

    @property
    def failures_logged(self) -> bool:
        """Whether any secondary logged a failed attempt."""
        return any(item.found for row in self.cases for item in row.logged_failures)

    @property
    def uniform_link(self) -> str | None:
        """The link description when every case ran on the same link, else None."""
        links = {row.link for row in self.cases if row.link is not None}
        return links.pop() if len(links) == 1 else None


def run_info(run_dir: Path, meta: RunMeta, transfers: int) -> RunInfo:
    host = meta.host
    cpu = host.cpu_model
    if cpu and host.cpu_count:
        cpu = f"{cpu} x {host.cpu_count}"
    return RunInfo(
        run_dir=str(run_dir),
        run_id=meta.run_id or run_dir.name,
        scenario=meta.name,
        description=meta.scenario.get("description"),
        scenario_path=meta.scenario_path,
        spec_hash=meta.spec_hash,
        started=meta.started,
        finished=meta.finished,
        state=meta.state,
        git_commit=host.git_commit,
        git_dirty=host.git_dirty,
        hostname=host.hostname,
        os=host.os,
        kernel=host.kernel,
        cpu=cpu,
        servers=[
            ServerVersion(kind=s.kind, version=s.version, path=s.path)
            for s in meta.servers.values()
        ],
        link_backend=meta.link_backend,
        transfers=transfers,
        cpu_placement=(meta.cpus or {}).get("reason"),
        cpu_split=_cpu_split_text(meta.cpu),
        zone=own_zone_text(meta.zone),
    )


def own_zone_text(zone: dict[str, Any] | None) -> str | None:
    """ "example.test. from v01.zone (17 versions): 150 records, 9.4 KiB; RRSIG 39 %, ..." """
    if not zone:
        return None
    versions = zone.get("versions") or 1
    name = Path(str(zone.get("file", "?"))).name
    loaded = f" ({versions} versions)" if versions > 1 else ""
    return (
        f"{zone.get('origin', '?')} from {name}{loaded}: {zone.get('records', 0):,} records, "
        f"{fmt.size(zone.get('bytes', 0))}; {zone.get('type_mix', '')}"
    )


def _cpu_split_text(cpu: dict[str, Any] | None) -> str | None:
    """ "servers 812.3 s, driver 95.1 s (5.6 % of the wall), link emulator and tools 40.2 s"."""
    if not cpu:
        return None

    def seconds(key: str) -> str:
        value = cpu.get(key)
        return "?" if value is None else f"{value:.1f} s"

    share = cpu.get("driver_share_of_wall")
    of_wall = "" if share is None else f" ({share:.1%} of the wall)"
    return (
        f"servers {seconds('servers_s')}, driver {seconds('driver_s')}{of_wall}, "
        f"link emulator and tools {seconds('other_s')}"
    )


def _fleet_link(meta: CaseMeta) -> str | None:
    """A fleet's links in words, one site after the other: "frankfurt: delay 1ms (each
    way); seoul: delay 50ms, loss random 1% (each way)"; the uplink last when it has one."""
    links = meta.testbed.get("links") if isinstance(meta.testbed, dict) else None
    if not isinstance(links, dict) or not meta.scenario.get("secondaries"):
        return None
    by_site: dict[str, str] = {}
    for host, link in links.items():
        text = describe_link(link) if isinstance(link, dict) else None
        if text:
            by_site.setdefault(meta.sites.get(host, host), text)
    parts = [f"{site}: {text}" for site, text in by_site.items()]
    uplink = meta.scenario.get("uplink")
    if isinstance(uplink, dict):
        ways = [uplink.get(w) for w in ("forward", "reverse")]
        words = [describe_direction(w) for w in ways if isinstance(w, dict)]
        if any(w != "delay 0ms" for w in words):
            parts.append(f"uplink: {describe_link(uplink)}")
    return "; ".join(parts) or None


def case_links(case_files: list[CaseMeta]) -> dict[str, str]:
    """Case name -> link description, from the case.json files of cases/ (per site for a
    fleet: the scenario's [link] is then only the default its sites started from)."""
    links = {}
    for meta in case_files:
        text = _fleet_link(meta) or (describe_link(meta.link) if meta.link else None)
        if text:
            links[meta.case] = text
    return links


def port_ranges(case_files: list[CaseMeta]) -> dict[str, tuple[int, bool]]:
    """Per case, the fewest ephemeral ports a secondary had (ip_local_port_range) and
    whether tcp_tw_reuse = 1 let it reuse a port still in TIME_WAIT (from case.json)."""
    out: dict[str, tuple[int, bool]] = {}
    for meta in case_files:
        hosts = meta.testbed.get("hosts") if isinstance(meta.testbed, dict) else None
        for host in (hosts or {}).values():
            if not isinstance(host, dict) or host.get("role") != "secondary":
                continue
            sysctls = host.get("sysctls") or {}
            words = str(sysctls.get("net.ipv4.ip_local_port_range", "")).split()
            if len(words) != 2 or not all(w.isdigit() for w in words):
                continue
            ports = int(words[1]) - int(words[0]) + 1
            reuse = str(sysctls.get("net.ipv4.tcp_tw_reuse", "")) == "1"
            known = out.get(meta.case)
            out[meta.case] = (min(ports, known[0]) if known else ports, reuse)
    return out


def _time_wait(sample: dict[str, Any]) -> int | None:
    tcp = sample.get("tcp")
    if isinstance(tcp, dict) and isinstance(tcp.get("time_wait"), int):
        return int(tcp["time_wait"])
    states = sample.get("tcp_states")
    if isinstance(states, dict):
        return int(states.get("time_wait", 0))  # only non-zero states are listed
    return None


def time_wait_series(
    samples: list[dict[str, Any]],
) -> tuple[dict[str, list[tuple[float, int]]], list[tuple[str, float, float]]]:
    """TIME_WAIT sockets per server role over time (seconds since the run's first sample),
    and the spans of the cases on that axis: each run of consecutive samples of one case,
    in the order they ran (an interleaved run visits a case once a round)."""
    timed = [s for s in samples if isinstance(s.get("t"), int | float)]
    if not timed:
        return {}, []
    t0 = min(float(s["t"]) for s in timed)
    series: dict[str, list[tuple[float, int]]] = {}
    spans: list[list[Any]] = []
    for sample in sorted(timed, key=lambda s: float(s["t"])):
        t = float(sample["t"]) - t0
        case = sample.get("case")
        if isinstance(case, str):
            if spans and spans[-1][0] == case:
                spans[-1][2] = t
            else:
                spans.append([case, t, t])
        role = sample.get("role")
        if role not in SERVER_ROLES:
            continue
        count = _time_wait(sample)
        if count is not None:
            series.setdefault(str(role), []).append((t, count))
    return series, [(str(case), first, last) for case, first, last in spans]


def build_report_data(folder: RunFolder) -> ReportData:
    """Pure: the report's numbers from a run folder's parsed files (``folder.samples`` None:
    the run has no samples.jsonl)."""
    run_dir, meta, records = folder.path, folder.meta, folder.records
    summary, samples, case_files = folder.summary, folder.samples, folder.cases
    warnings = []
    run = run_info(run_dir, meta, len(records))
    if run.state == "interrupted":
        warnings.append("the run was interrupted (Ctrl-C): later cases may be missing")
    elif run.state == "unfinished":
        warnings.append(
            "the run never finished (run.json has no end time: the driver was killed); "
            "figures come from the transfers it recorded"
        )
    if slow_sum := digest_warning(meta.digest):
        warnings.append(slow_sum)
    rows = case_rows(records, case_links(case_files))
    if not records:
        warnings.append(f"{TRANSFERS} holds no transfer")

    resources: list[CaseResources] = []
    source = note = None
    stored = summary.get("resources") if isinstance(summary, dict) else None
    if isinstance(stored, dict) and stored:
        resources, source = case_resources(stored), SUMMARY_JSON
    elif samples is None:
        note = (
            f"no {SAMPLES} in this run (recorded before per-host sampling existed, or "
            "sampling was off): CPU, memory and TIME_WAIT are not available"
        )
    elif not samples:
        note = f"{SAMPLES} is empty: no resource sample was taken"
    else:
        resources, source = case_resources(summarize_resources(samples, records)), SAMPLES
    if source is not None and not resources:
        note = "the resource summary has no case"

    time_wait: dict[str, list[tuple[float, int]]] = {}
    spans: list[tuple[str, float, float]] = []
    samples_note = None
    if samples is None:
        samples_note = f"no {SAMPLES} in this run: no time series"
    else:
        time_wait, spans = time_wait_series(samples)
        if not time_wait:
            samples_note = f"{SAMPLES} has no server sample with a TIME_WAIT count"
    metas = {meta.case: meta for meta in case_files}
    failures = summarize_failures(records)
    cpu = {
        f"{case} {role}": figures["cpu_s"]
        for case, roles in per_transfer(samples or [], records).items()
        for role, figures in roles.items()
    }
    durations = {row.case: row.durations_s for row in rows if row.method == SERVER_TO_SERVER}
    phases = case_phases(records)
    return ReportData(
        run=run,
        cases=rows,
        resources=resources,
        resources_source=source,
        resources_note=note,
        time_wait=time_wait,
        case_spans=spans,
        samples_note=samples_note,
        warnings=warnings,
        compare_plan=run_plan_lines(durations, cpu),
        transports=transport_costs(records),
        phases=phases,
        links=(links := link_checks(records, metas)),
        real_paths=under_links(real_paths(meta.remote), links),
        bounds=bound_rows(records, metas),
        bounds_missing=[(p.label, p.missing) for p in phases if p.missing],
        port_ranges=port_ranges(case_files),
        fleet=fleet_data(summary, records, samples),
        failures=failures,
        failed_attempts=[
            FailedAttempt(
                case=case_label(r.case, r.method),
                repeat=r.repeat,
                host=r.host,
                kind=FAILURE_WORDS[r.failure or "harness"],
                reason=reason_text(r),
                number=failures.number(r),
            )
            for r in records
            if not r.counts and not r.unsupported and not r.unchecked  # a stream's earlier serials
        ],
        faults=fault_data(records),
        stream=stream_data(summary, records),
        catalog=catalog_summary(records),
        cold_starts=cold_starts(records),
    )


def load_report_data(run_dir: Path) -> ReportData:
    """The report's numbers for a run folder (read through harness.results.folder)."""
    return build_report_data(open_run(run_dir))
