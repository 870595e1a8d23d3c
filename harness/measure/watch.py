"""What a transfer did on the wire, beside how long it took: the link's packets and drops
in each direction during it (and whether the drops fit the configured loss), the TCP window
the secondary really advertised, when the secondary asked for the SOA and connected (and
how many connections it opened: SYNs counted distinct by source port), and what it left in
the TCP tables (`extra["sockets"]`: harness/observe/transfer_sockets.py).

    observer = TransferObserver(places, plan, wire)
    observer.begin()                     # counters and sockets now; TCP watches start
    ...                                  # the trigger, the transfer
    observer.finish()                    # every transfer ended: counters and sockets
    ...                                  # the harness checks the primary, reads copies back
    facts = observer.end(host, t0, t1)   # for the record's `extra`

The sockets are dumped (sock_diag) in the primary's and every secondary's namespace three
times: at the start, once the transfers ended (again, for up to CLOSE_WAIT_S, while a new
connection of a pair is still closing, so that a close is counted rather than raced), and
at `end()`, after the harness's own connections (its read-back of that copy, the primary
check): those are counted apart (the primary's namespace is dumped at the first `end()`
of the repeat, so its harness figures are the repeat's, alike in each of its records).
A transfer's TIME_WAIT sockets last 60 s from its close: a repeat whose last transfer ends
more than that after another's undercounts the earlier.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from harness.link import linkem
from harness.link.losscheck import check_loss
from harness.observe.sampler import normalize_link_counters
from harness.observe.sockdiag import SockDiagRefused
from harness.observe.transfer_sockets import Ends, closing, ends, transfer_sockets
from harness.place import Place, Places, TcpWatch
from harness.plan.case import CasePlan
from harness.spec import DirectionSpec
from harness.xfr.wire_watch import WireEvent, WireWatch

FRESH_STATS_WAIT = 1.0  # seconds: linkem rewrites its stats file every stats_interval_ms
CLOSE_WAIT_S = 1.0  # seconds the after-dump waits for a pair's connections to finish closing


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

    def __init__(self, places: Places, plan: CasePlan, wire: WireWatch | None):
        self.places = places
        self.plan = plan
        self.wire = wire
        self.port = plan.transport.port  # the primary's port its secondaries connect to
        self._before: dict[str, Any] = {}
        self._after: dict[str, Any] = {}
        self._watches: dict[str, TcpWatch] = {}
        self._paths: dict[str, Any] = {}  # secondary -> its path's TCP counts, where counted
        self._stack = contextlib.ExitStack()
        self._began = self._finished = 0.0  # monotonic: the repeat's observation window
        self._sockets: dict[str, dict[str, list[Ends]]] = {}  # "before"/"after" -> host -> dump
        self._primary_later: list[Ends] | None = None  # the primary's dump at the first end()
        self._sockets_error: str | None = None
        # One secondary per site is watched: tcp_info sampling costs a dump per 20 ms each.
        self._watched = list({h.site: h.name for h in plan.secondaries}.values())

    def begin(self) -> None:
        self._before = self.places.link_counters()
        primary = self._place(self.plan.primary.name)
        since = self._began = time.monotonic()
        self._sockets["before"] = self._dumps()
        secondaries = [h.name for h in self.plan.secondaries]
        counting = self.places.path_counts(self.plan.primary.name, secondaries, self.port)
        self._paths = self._stack.enter_context(counting)  # filled as finish() closes it
        for name in self._watched:
            host = self._place(name)
            with contextlib.suppress(SockDiagRefused):
                watch = host.connection_watch(
                    (primary.address, self.port), self._connects(host.address, since)
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
        self._finished = time.monotonic()
        self._after = self._fresh_counters()
        self._sockets["after"] = self._settled_dumps()

    def end(self, host: str, t0: float, served: float) -> dict[str, Any]:
        """What the transfer to `host` (from t0 to served, monotonic) did on the wire."""
        facts: dict[str, Any] = {}
        after = self._after
        specs = {
            d.name: d.spec
            for d in self.places.link_directions()
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
            address = self._place(host).address
            facts["wire"] = wire_facts(self.wire.events(address, t0, served), t0)
        if host in self._paths:
            facts["path"] = self._paths[host]  # the repeat's, as the primary's TCP saw it
        sockets = self._transfer_sockets(host)
        if sockets is not None:
            facts["sockets"] = sockets
        return facts

    # --- what each transfer left in the TCP tables ---------------------------------------

    def _place(self, name: str) -> Place:
        return self.places.place(name)

    def _hosts(self) -> list[str]:
        return [self.plan.primary.name, *(h.name for h in self.plan.secondaries)]

    def _dump(self, name: str) -> list[Ends]:
        return ends(self._place(name).tcp_sockets())

    def _dumps(self, names: list[str] | None = None) -> dict[str, list[Ends]]:
        """Every TCP socket of each host's namespace now; {} once sock_diag refused."""
        if self._sockets_error is not None:
            return {}
        try:
            return {name: self._dump(name) for name in names or self._hosts()}
        except SockDiagRefused as exc:
            self._sockets_error = str(exc)
            return {}

    def _settled_dumps(self) -> dict[str, list[Ends]]:
        """The dumps once the transfers ended; the namespaces of a pair whose new
        connection is still closing (FIN sent, TIME_WAIT not reached yet) are dumped again,
        for up to CLOSE_WAIT_S."""
        before = self._sockets.get("before", {})
        primary = self.plan.primary.name
        by_address = {self._place(h.name).address: h.name for h in self.plan.secondaries}
        pairs = [(self._place(primary).address, a) for a in by_address]
        every_before = [s for socks in before.values() for s in socks]
        after = self._dumps()
        deadline = time.monotonic() + CLOSE_WAIT_S
        while after and time.monotonic() < deadline:
            every_after = [s for socks in after.values() for s in socks]
            pairs = closing(every_before, every_after, pairs)
            if not pairs:
                break
            time.sleep(0.01)
            after |= self._dumps([primary, *(by_address[b] for _, b in pairs)])
        return after

    def _transfer_sockets(self, host: str) -> dict[str, Any] | None:
        """`host`'s record's extra["sockets"] (transfer_sockets), None without dumps."""
        primary = self.plan.primary.name
        before, after = self._sockets.get("before", {}), self._sockets.get("after", {})
        if self._primary_later is None:
            self._primary_later = self._dumps([primary]).get(primary, [])
        later = self._dumps([host])
        if self._sockets_error is not None:
            return {"error": self._sockets_error}
        if not all(primary in d and host in d for d in (before, after)) or host not in later:
            return None
        syn_ports: list[int] = []
        address = self._place(host).address
        if self.wire is not None:
            events = self.wire.events(address, self._began, self._finished)
            syn_ports = [e.port for e in events if e.kind == "connect" and e.port is not None]
        return transfer_sockets(
            {"primary": before[primary], "secondary": before[host]},
            {"primary": after[primary], "secondary": after[host]},
            {"primary": self._primary_later, "secondary": later[host]},
            {"primary": self._place(primary).address, "secondary": address},
            syn_ports,
        )

    def _fresh_counters(self) -> dict[str, Any]:
        """Counters written after the transfers ended: linkem's file lags by its interval."""
        counters = self.places.link_counters()
        if self.places.backend != "linkem":
            return counters
        ended = time.time()
        deadline = time.monotonic() + FRESH_STATS_WAIT
        while time.monotonic() < deadline:
            stamps = [c.get("updated_at_unix", 0) for c in counters.values() if c]
            if not stamps or min(stamps) >= ended:
                break
            time.sleep(linkem.FAST_STATS_INTERVAL_MS / 2000)
            counters = self.places.link_counters()
        return counters
