"""Where the time went (pure): per server-to-server case (and fleet site), the transfer with
the median duration, its phases as consecutive segments on one time axis, each ending at an
instant seen on the wire, in a server's log or by the harness's SOA polls (``SEEN``).

One of the first screen's answers: ``data.build_report_data`` calls ``case_phases`` with the
parsed records, and the renderers (HTML, terminal, figures) only format the result.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.core.terms import SERVER_TO_SERVER, TRANSPORTS, XFR_KINDS
from harness.core.transport import Transport
from harness.results.failures import no_result
from harness.results.model import TransferRecord

# The instants a transfer's phases are measured at, in the order they happen (the legend's
# order), and where each is seen. Times in records are seconds since the trigger (t0): the
# NOTIFY leaving the primary, the control command, or the secondary's start; primary_reload
# and notify_sent count from the harness's reload command instead.
ORIGIN_RELOAD = "the harness issues the reload command on the primary (time 0)"
ORIGIN_CONTROL = "the harness runs the control command on the secondary (time 0)"
ORIGIN_START = "the harness starts the secondary (time 0)"
ORIGIN_TRIGGER = "the transfer's trigger, as its record counts it (time 0)"
XOT_NOTE = (
    "no SOA query on the wire: it travels inside TLS, with the TLS handshake, between "
    "connect and the transfer's start"
)
# Why XoT's bars are longer before the transfer than TCP's (bench/README-phases.md has the
# evidence: BIND 9.18's debug log and the primary's wire, 20 ms RTT).
XOT_WHY = (
    "XoT: between connect and the transfer's start lie the TLS handshake and, for AXFR, the "
    "SOA query inside TLS (BIND sends none over UDP to a TLS primary); BIND's first request "
    "after the handshake also leaves a round trip late, held until the primary acknowledges "
    "the TLS Finished (Nagle). About four round trips, against one for TCP."
)
SEEN = {
    "NOTIFY": "wire: the primary's NOTIFY to this secondary, seen leaving the primary",
    "SOA query": "wire: the secondary's SOA query, seen arriving at the primary",
    "connect": "wire: the secondary's SYN to the primary (the connection that carried it)",
    "transfer starts (log)": (
        "the secondary's log: served minus the transfer time it logged. BIND logs from its "
        "transfer request (after the TCP and TLS handshakes and, for AXFR over TLS, an SOA "
        "query inside the TLS session) to the last message, and commits the zone in the same "
        "millisecond (its debug log), so what comes before this instant is connecting"
    ),
    "served": "harness: the first SOA poll (every 5 ms) answered with the new serial",
    "first zone": "harness: the first zone answered with its serial (SOA polls)",
    "median zone": "harness: half of the zones answered (SOA polls)",
    "95 % of zones": "harness: 95 % of the zones answered (SOA polls)",
    "every zone": "harness: the last zone answered (SOA polls)",
}


@dataclass
class Segment:
    name: str  # "SOA query -> connect"
    start_s: float  # on the bar, from its time 0
    seconds: float
    seen: str  # where its end instant is observed


@dataclass
class CasePhases:
    case: str
    site: str | None  # fleets: one bar per case and site
    trigger: str | None
    repeat: int  # the median transfer's repeat
    host: str | None
    n: int  # transfers that count, the median one of which is shown
    origin: str  # what time 0 of the bar is
    offset_s: float  # where the measured duration starts on the bar (the NOTIFY)
    duration_s: float  # the record's duration_s (from its trigger to served)
    segments: list[Segment]
    markers: dict[str, float]  # instants not in sequence: "primary serves it" (from time 0)
    logged_secondary_s: float | None  # the servers' own figures, beside the bar
    logged_primary_s: float | None
    notes: list[str] = field(default_factory=list)
    missing: str | None = None  # why the case has no bar (no verified transfer)

    @property
    def label(self) -> str:
        return self.case if self.site is None else f"{self.case} @ {self.site}"

    @property
    def total_s(self) -> float:
        return self.offset_s + self.duration_s


def _logged(record: TransferRecord, role: str) -> float | None:
    figures = record.server_logged.get(role)
    if isinstance(figures, dict):
        value = figures.get("duration_s")
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value)
    return None


def _median_record(records: list[TransferRecord]) -> TransferRecord:
    """The transfer whose duration is the (lower) median: one real transfer, whose phases
    add up to its own duration (medians of each phase would not)."""
    ordered = sorted(records, key=lambda r: float(r.duration_s or 0.0))
    return ordered[(len(ordered) - 1) // 2]


def phases_of(record: TransferRecord, n: int, site: str | None) -> CasePhases:
    """The phases of one transfer as consecutive segments on one time axis."""
    phases, duration = record.phases, float(record.duration_s or 0.0)
    logged = _logged(record, "secondary")
    notes: list[str] = []
    markers: dict[str, float] = {}
    offset = 0.0
    points: list[tuple[str, float]] = []  # (instant, seconds since the trigger)
    if record.trigger == "cold-start":
        origin = ORIGIN_START
        for key, name in (
            ("zones_first", "first zone"),
            ("zones_p50", "median zone"),
            ("zones_p95", "95 % of zones"),
        ):
            if key in phases:
                points.append((name, phases[key]))
        points.append(("every zone", duration))
        start = "start"
    else:
        if record.trigger == "notify" and "notify_sent" in phases:
            origin, offset, start = ORIGIN_RELOAD, phases["notify_sent"], "reload command"
            points.append(("NOTIFY", offset))
            if "primary_reload" in phases:
                markers["primary serves it"] = phases["primary_reload"]
        elif record.trigger == "retransfer":
            origin, start = ORIGIN_CONTROL, "control command"
            if "control_returned" in phases:
                markers["command returned"] = phases["control_returned"]
            if "primary_reload" in phases:
                notes.append(
                    f"the primary served the new version {phases['primary_reload']:.3g} s "
                    "after its reload command, before the control command"
                )
        else:  # a record from before phases were kept (or a NOTIFY nobody saw)
            origin, start = ORIGIN_TRIGGER, "trigger"
        if "soa_query" in phases:
            points.append(("SOA query", phases["soa_query"]))
        elif Transport.parse(record.transport).tls:
            notes.append(XOT_NOTE)
        if "connect" in phases:
            points.append(("connect", phases["connect"]))
            # The logged time ends where the secondary serves the zone (BIND commits it in
            # the millisecond it logs the end), so it is placed back from served: placed
            # from the connect, XoT's handshakes and SOA query in TLS looked like a 77 ms
            # wait after the transfer.
            if logged is not None and phases["connect"] + logged <= duration:
                points.append(("transfer starts (log)", duration - logged))
            elif logged is not None:
                # A log's clock may start before the connect (at the SOA answer), or round
                # up: the instant would land before the connect, which is measured.
                notes.append(
                    f"the secondary logged {logged:.4g} s, more than connect to served "
                    f"({duration - phases['connect']:.4g} s): not placed"
                )
        elif logged is not None:
            notes.append("no connect seen on the wire: the logged transfer is not placed")
        points.append(("served", duration))
    segments: list[Segment] = []
    previous, at = start, 0.0
    for name, when in points:
        bar = when if name == "NOTIFY" else offset + when  # the NOTIFY is t0 itself
        if bar < at:
            # Clocks of different origins (a log's ms figure, the wire) can disagree by a
            # little; the instant is dropped rather than drawn as a negative segment.
            notes.append(f"{name} ({bar:.4g} s) precedes {previous} ({at:.4g} s): not drawn")
            continue
        segments.append(Segment(f"{previous} -> {name}", at, bar - at, SEEN[name]))
        previous, at = name, bar
    return CasePhases(
        case=record.case,
        site=site,
        trigger=record.trigger,
        repeat=record.repeat,
        host=record.host if record.site is not None else None,
        n=n,
        origin=origin,
        offset_s=offset,
        duration_s=duration,
        segments=segments,
        markers=markers,
        logged_secondary_s=logged,
        logged_primary_s=_logged(record, "primary"),
        notes=notes,
    )


def no_phases(case: str, site: str | None, why: str) -> CasePhases:
    """The row of a case (or site) with no verified transfer: no bar, and why."""
    return CasePhases(case, site, None, 0, None, 0, "", 0.0, 0.0, [], {}, None, None, missing=why)


def row_order(records: list[TransferRecord]) -> tuple[int, int]:
    """Rows grouped by transfer kind, then transport, each in its one fixed order (AXFR
    before IXFR; TCP, TCP+TSIG, XoT, XoT+TSIG); the run's order within."""
    first = records[0]
    return XFR_KINDS.index(first.xfr), TRANSPORTS.index(first.transport)


def case_phases(records: Iterable[TransferRecord]) -> list[CasePhases]:
    """Per server-to-server case (and site, in a fleet): the median transfer's phases, in
    row_order; a case with no verified transfer keeps its row, saying why."""
    groups: dict[tuple[str, str | None], list[TransferRecord]] = {}
    for record in records:
        if record.method == SERVER_TO_SERVER:
            groups.setdefault((record.case, record.site), []).append(record)
    out = []
    for (case, site), items in sorted(groups.items(), key=lambda item: row_order(item[1])):
        counted = [r for r in items if r.counts]
        if counted:
            out.append(phases_of(_median_record(counted), len(counted), site))
        else:
            out.append(no_phases(case, site, no_result(items) or "no verified transfer"))
    return out
