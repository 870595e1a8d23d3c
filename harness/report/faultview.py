"""The faults section's numbers (pure): how each secondary healed after each fault, from the
records' extra["fault"] (harness/measure/faults.py writes it).

- `FaultCase`: one faulted repeat: the fault's window and, per secondary, its healing, the
  bytes its link carried over time, the failure lines' times, the instant it served;
- the table: one row per fault and transfer (its name, transport and kind), one column per
  server kind, each cell what that kind of secondary did: "healed in 2.4 s", "unaffected",
  "stuck" with the server's own words (the lines of its zone status that say what it waits
  for) and whether a new NOTIFY freed it.

Part of the report's model (data.py); figures_faults.py draws the timelines.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from harness.core.terms import FAULT_KINDS, TRANSPORTS, XFR_KINDS
from harness.results.model import TransferRecord

# The parts of a zone status that say what a stuck secondary waits for, in any server's
# words (BIND "next refresh: <date>", Knot "refresh: +4m40s", NSD "state: refreshing" and
# "wait: ... between attempts").
_STATUS_WORDS = ("refresh", "retry", "state", "wait")
_STATUS_PARTS = re.compile(r"\n|\s\|\s")
MAX_WORDS = 160
NOT_AS_ASKED = "fault not as asked"


@dataclass
class HostHealing:
    host: str
    kind: str  # the secondary's server kind
    targeted: bool
    # not as asked (the fault did not happen as the scenario says: no answer) | healed |
    # during (served while the fault lasted) | unaffected (before it began) | stuck | freed
    # (stuck, then served after the new NOTIFY) | unsupported | failed | no fault | not
    # targeted (a fault on another site)
    outcome: str
    heal_s: float | None
    served_s: float | None  # since the trigger
    fired_s: float | None
    retry_xfr: str | None
    failures: dict[str, int]  # by category, since the fault began
    words: str  # the server's own words: its first failure line, or its zone status
    timeline: list[tuple[float, int]]  # (seconds since the trigger, bytes towards it)
    marks: list[tuple[float, str]]  # failure lines: (seconds since the trigger, category)
    error: str | None = None


@dataclass
class FaultCase:
    case: str
    repeat: int
    name: str  # the fault's name (its kind by default)
    kind: str
    transport: str
    xfr: str
    began_s: float | None
    ended_s: float | None
    hosts: list[HostHealing] = field(default_factory=list)


@dataclass
class FaultCell:
    outcome: str  # what most repeats did, in a few words
    heal_s: float | None  # median over the repeats that healed
    stuck: int
    freed: int
    n: int
    words: str  # the server's words behind a stuck (or failed) outcome
    not_as_asked: int = 0  # repeats in which the fault did not happen as asked


@dataclass
class FaultRow:
    fault: str
    transport: str
    xfr: str
    cells: dict[str, FaultCell]  # server kind -> its cell


@dataclass
class FaultData:
    cases: list[FaultCase]
    rows: list[FaultRow]
    kinds: list[str]  # the secondaries' server kinds, sorted


def status_words(status: str | None) -> str:
    """The lines of a zone status that say what the server waits for, joined short."""
    if not status:
        return ""
    lines = [part.strip() for part in _STATUS_PARTS.split(status) if part.strip()]
    kept = [line for line in lines if any(w in line.lower() for w in _STATUS_WORDS)]
    text = "; ".join(kept or lines)
    return text if len(text) <= MAX_WORDS else text[: MAX_WORDS - 1] + "…"


def _host(record: TransferRecord) -> HostHealing:
    fault = record.extra.get("fault") or {}
    server = fault.get("server") or {}
    counts = {
        k: int(v)
        for k, v in (server.get("failures") or {}).items()
        if isinstance(v, int) and not isinstance(v, bool) and v and k != "failing_lines"
    }
    lines = server.get("failure_lines") or []
    not_as_asked = fault.get("not_as_asked")
    if record.unsupported:
        outcome = "unsupported"
    elif not_as_asked:
        outcome = NOT_AS_ASKED
    elif fault.get("stuck"):
        outcome = "freed" if fault.get("freed_by_notify") else "stuck"
    elif not record.counts:
        outcome = "failed"
    elif fault.get("began_s") is None:
        outcome = "no fault"
    elif not fault.get("targeted", True):
        outcome = "not targeted"  # another site's fault: it shows what the fleet did
    elif fault.get("unaffected"):
        outcome = "unaffected"
    elif _before(fault.get("served_s"), fault.get("ended_s")):
        outcome = "during"  # it served while the fault lasted
    else:
        outcome = "healed"
    account = fault.get("account") or {}
    words = status_words(account.get("status")) if fault.get("stuck") else ""
    if not words and lines:
        words = lines[0]
    if record.unsupported:  # "unsupported: secondary knot 3.2.6: <why>": the why
        words = (record.error or "").rsplit(": ", 1)[-1]
    if not_as_asked:  # the fault's own error, before anything the servers said
        words = str(not_as_asked)
    return HostHealing(
        host=record.host,
        kind=record.secondary_kind,
        targeted=bool(fault.get("targeted")),
        outcome=outcome,
        heal_s=fault.get("heal_s"),
        served_s=fault.get("served_s"),
        fired_s=fault.get("fired_s"),
        retry_xfr=server.get("retry_xfr"),
        failures=counts,
        words=words,
        timeline=[(float(t), int(b)) for t, b in fault.get("timeline") or []],
        marks=[(float(t), str(c)) for t, c in fault.get("marks") or []],
        error=record.error,
    )


def _before(served: float | None, ended: float | None) -> bool:
    return served is not None and ended is not None and served < ended


def _cell(hosts: list[HostHealing]) -> FaultCell:
    outcomes = [h.outcome for h in hosts]
    stuck = sum(o in ("stuck", "freed") for o in outcomes)
    freed = outcomes.count("freed")
    heals = [h.heal_s for h in hosts if h.outcome == "healed" and h.heal_s is not None]
    # A fault that did not happen as asked comes first: what the others did answers nothing
    # about it.
    main = (
        NOT_AS_ASKED
        if NOT_AS_ASKED in outcomes
        else max(dict.fromkeys(outcomes), key=outcomes.count)
    )
    words = next((h.words for h in hosts if h.outcome == main and h.words), "")
    return FaultCell(
        outcome=main,
        heal_s=statistics.median(heals) if heals else None,
        stuck=stuck,
        freed=freed,
        n=len(hosts),
        words=words,
        not_as_asked=outcomes.count(NOT_AS_ASKED),
    )


def cell_text(cell: FaultCell) -> str:
    """A cell in a few words: 'healed in 2.40 s', 'stuck 2 of 3 (...); NOTIFY freed 2'."""
    if cell.outcome == "healed":
        text = f"healed in {cell.heal_s:.2f} s" if cell.heal_s is not None else "healed"
    elif cell.outcome in ("stuck", "freed") and cell.n == 1:
        text = "stuck; " + ("a new NOTIFY freed it" if cell.freed else "a new NOTIFY did not")
    elif cell.outcome in ("stuck", "freed"):
        text = f"stuck {cell.stuck} of {cell.n}; a new NOTIFY freed {cell.freed}"
    elif cell.outcome == NOT_AS_ASKED:
        text = NOT_AS_ASKED + (f" {cell.not_as_asked} of {cell.n}" if cell.n > 1 else "")
    elif cell.outcome == "during":
        text = "served during the fault"
    else:
        text = cell.outcome
    if cell.outcome not in ("stuck", "freed") and cell.stuck:
        text += f" (stuck {cell.stuck} of {cell.n})"
    return text


def fault_data(records: list[TransferRecord]) -> FaultData | None:
    """The faults section of a run whose cases had faults (None otherwise)."""
    faulted = [r for r in records if "fault" in r.extra]
    if not faulted:
        return None
    cases: dict[tuple[str, int], FaultCase] = {}
    kinds: list[str] = []
    for record in faulted:
        fault = record.extra["fault"]
        if record.secondary_kind not in kinds:
            kinds.append(record.secondary_kind)
        if record.unsupported:  # a secondary that could not take the case: the table only
            continue
        key = (record.case, record.repeat)
        if key not in cases:
            cases[key] = FaultCase(
                case=record.case,
                repeat=record.repeat,
                name=str(fault.get("name") or fault.get("kind")),
                kind=str(fault.get("kind")),
                transport=record.transport,
                xfr=record.xfr,
                began_s=fault.get("began_s"),
                ended_s=fault.get("ended_s"),
            )
        cases[key].hosts.append(_host(record))
    grouped: dict[tuple[str, str, str], dict[str, list[HostHealing]]] = {}
    kinds_of: dict[str, str] = {}
    for record in faulted:
        fault = record.extra["fault"]
        name = str(fault.get("name") or fault.get("kind"))
        kinds_of.setdefault(name, str(fault.get("kind")))
        key = (name, record.transport, record.xfr)
        grouped.setdefault(key, {}).setdefault(record.secondary_kind, []).append(_host(record))
    rows = [
        FaultRow(name, transport, xfr, {kind: _cell(hosts) for kind, hosts in per.items()})
        for (name, transport, xfr), per in grouped.items()
    ]
    # Transport, then kind, then the fault in the scenario's order of kinds (runs interleave).
    order = {name: _kind_rank(kind) for name, kind in kinds_of.items()}
    rows.sort(
        key=lambda r: (_rank(TRANSPORTS, r.transport), _rank(XFR_KINDS, r.xfr), order[r.fault])
    )
    return FaultData(list(cases.values()), rows, sorted(kinds))


def _rank(order: tuple[str, ...], value: str) -> int:
    return order.index(value) if value in order else len(order)


def _kind_rank(kind: str) -> tuple[int, str]:
    return _rank(FAULT_KINDS, kind), kind


def series(case: FaultCase) -> dict[str, Any]:
    """What the timeline figure plots for one faulted repeat."""
    return {
        "case": case.case,
        "repeat": case.repeat,
        "name": case.name,
        "window": [case.began_s, case.ended_s],
        "hosts": [
            {
                "host": h.host,
                "kind": h.kind,
                "outcome": h.outcome,
                "served_s": h.served_s,
                "fired_s": h.fired_s,
                "timeline": [list(p) for p in h.timeline],
                "marks": [list(m) for m in h.marks],
            }
            for h in case.hosts
        ],
    }
