"""What a transfer did on the wire, beside how long it took: the link's packets and drops
in each direction during it (and whether the drops fit the configured loss), the TCP window
the secondary really advertised, and when the secondary asked for the SOA and connected
(and how many connections it opened: SYNs counted distinct by source port).

    observer = TransferObserver(testbed, plan, wire, tls)
    observer.begin()                     # counters now; TCP watches start
    ...                                  # the trigger, the transfer
    facts = observer.end(host, t0, t1)   # for the record's `extra`
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from harness.link import linkem
from harness.link.losscheck import check_loss
from harness.observe.sampler import normalize_link_counters
from harness.observe.sockdiag import ConnectionWatch, SockDiagRefused
from harness.plan.case import CasePlan
from harness.spec import DirectionSpec
from harness.testbed import Testbed
from harness.xfr.wire_watch import WireEvent, WireWatch

FRESH_STATS_WAIT = 1.0  # seconds: linkem rewrites its stats file every stats_interval_ms


def link_delta(
    before: dict[str, Any], after: dict[str, Any], specs: dict[str, DirectionSpec]
) -> dict[str, Any]:
    """Per direction: packets passed and dropped between two counter snapshots, the bytes the
    rate limiter sent, and the loss check against the configured model (pure)."""
    out: dict[str, Any] = {}
    norm_before, norm_after = normalize_link_counters(before), normalize_link_counters(after)
    for name, spec in specs.items():
        a, b = before.get(name) or {}, after.get(name) or {}
        entry: dict[str, Any] = {}
        if name in norm_after:
            first = norm_before.get(name, {"passed": 0, "dropped": 0})
            entry["passed"] = norm_after[name]["passed"] - first["passed"]
            entry["dropped"] = norm_after[name]["dropped"] - first["dropped"]
        if "dropped_loss" in b:  # linkem tells its random drops from queue overflows
            entry["dropped_loss"] = b["dropped_loss"] - a.get("dropped_loss", 0)
            entry["dropped_overflow"] = b.get("dropped_overflow", 0) - a.get("dropped_overflow", 0)
            entry["emulated"] = b.get("passed", 0) - a.get("passed", 0) + entry["dropped_loss"]
        htb_a, htb_b = a.get("htb") or {}, b.get("htb") or {}
        if "bytes" in htb_b:
            entry["rate_bytes"] = htb_b["bytes"] - htb_a.get("bytes", 0)
        if spec.loss.active and ("dropped_loss" in entry or "dropped" in entry):
            # linkem counts its random drops apart; netem's drops are nearly all random.
            if "dropped_loss" in entry:
                lost, passed = entry["dropped_loss"], entry["emulated"] - entry["dropped_loss"]
            else:
                lost, passed = entry["dropped"], entry["passed"]
            check = check_loss(spec.loss, passed, lost)
            entry["loss_check"] = {
                "configured_pct": round(check.expected_rate * 100, 6),
                "measured_pct": None
                if check.measured_rate is None
                else round(check.measured_rate * 100, 6),
                "expected_drops": round(check.expected_drops, 3),
                "verdict": check.verdict,
                "p_value": check.p_value,
                "sentence": check.sentence,
            }
        if entry:
            out[name] = entry
    return out


def wire_facts(events: list[WireEvent], t0: float) -> dict[str, Any]:
    """What a secondary did on the primary's wire during its transfer (pure): SOA queries,
    SYNs, and connections counted distinct by source port (a SYN sent again, lost or
    unanswered, is the same connection), and when the first query and the last SYN came."""
    soa = [e.at for e in events if e.kind == "soa_query"]
    syns = [e for e in events if e.kind == "connect"]
    facts: dict[str, Any] = {
        "soa_queries": len(soa),
        "syns": len(syns),
        "connections": len({e.port for e in syns}),
    }
    if soa:
        facts["soa_query_s"] = soa[0] - t0
    if syns:
        facts["connect_s"] = syns[-1].at - t0  # the one that carried it
    return facts


class TransferObserver:
    """The observations around one repeat's transfers (every secondary of the case)."""

    def __init__(self, testbed: Testbed, plan: CasePlan, wire: WireWatch | None, tls: bool):
        self.testbed = testbed
        self.plan = plan
        self.wire = wire
        self.port = 853 if tls else 53
        self._before: dict[str, Any] = {}
        self._after: dict[str, Any] = {}
        self._watches: dict[str, ConnectionWatch] = {}
        self._stack = contextlib.ExitStack()
        # One secondary per site is watched: tcp_info sampling costs a dump per 20 ms each.
        self._watched = list({h.site: h.name for h in plan.secondaries}.values())

    def begin(self) -> None:
        self._before = self.testbed.link_counters()
        primary = self.testbed.primary
        since = time.monotonic()
        for name in self._watched:
            host = self.testbed.hosts[name]
            with contextlib.suppress(SockDiagRefused):
                watch = ConnectionWatch(
                    (primary.address, self.port),
                    netns=host.netns,
                    candidates=self._connects(host.address, since),
                )
                self._watches[name] = self._stack.enter_context(watch)

    def _connects(self, address: str, since: float) -> Callable[[], list[tuple[str, int]]] | None:
        """The connections `address` opened to the primary since `since`, as its wire watch
        saw their SYNs: the TCP watch looks them up instead of walking the kernel's table.
        None without a wire watch (the TCP watch then dumps, filtered in the kernel)."""
        wire = self.wire
        if wire is None:
            return None
        return lambda: [
            (address, e.port)
            for e in wire.events(address, since)
            if e.kind == "connect" and e.port is not None
        ]

    def finish(self) -> None:
        """Every transfer ended: stop the TCP watches (before verification, which costs CPU
        of its own) and read the link's counters."""
        self._stack.close()
        self._after = self._fresh_counters()

    def end(self, host: str, t0: float, served: float) -> dict[str, Any]:
        """What the transfer to `host` (from t0 to served, monotonic) did on the wire."""
        facts: dict[str, Any] = {}
        after = self._after
        specs = {
            d.name: d.spec
            for d in (self.testbed.emulation.directions if self.testbed.emulation else [])
            if d.endpoint in (host, self.plan.primary.name)
        }
        delta = link_delta(self._before, after, specs)
        if delta:
            facts["link"] = delta
        watch = self._watches.get(host)
        if watch is not None:
            peaks = watch.peaks()
            if watch.error:
                peaks["error"] = watch.error
            facts["tcp"] = peaks
        if self.wire is not None:
            address = self.testbed.hosts[host].address
            facts["wire"] = wire_facts(self.wire.events(address, t0, served), t0)
        return facts

    def _fresh_counters(self) -> dict[str, Any]:
        """Counters written after the transfers ended: linkem's file lags by its interval."""
        counters = self.testbed.link_counters()
        if self.testbed.backend != "linkem":
            return counters
        ended = time.time()
        deadline = time.monotonic() + FRESH_STATS_WAIT
        while time.monotonic() < deadline:
            stamps = [c.get("updated_at_unix", 0) for c in counters.values() if c]
            if not stamps or min(stamps) >= ended:
                break
            time.sleep(linkem.FAST_STATS_INTERVAL_MS / 2000)
            counters = self.testbed.link_counters()
        return counters
