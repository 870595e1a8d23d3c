"""The real paths of a run on inventory hosts, for the link check (pure): an inventory
run shows the path it found, from run.json's remote.paths: the round trip pinged from each
secondary, the smallest RTT the primary's TCP saw, the retransmits of the segments it sent
over the run's transfers, and the bandwidth probed from the primary to each site's first
secondary. Where a site sets a [link], the emulated link's check follows, and the path's
TCP figures are the transfers' through that link (`linked`); ping and the probe ran
before any link was emulated.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class RealPath:
    host: str  # the secondary, by its inventory name
    site: str
    ping_min_s: float | None
    ping_avg_s: float | None
    ping_lost: str | None  # "0 of 5 lost"
    tcp_rtt_min_s: float | None  # the primary's connections' smallest RTT
    transfers: int
    data_segs_out: int | None
    retransmits: int | None
    retransmit_pct: float | None
    bandwidth_bps: float | None  # iperf3, primary to this secondary
    probe_retransmits: int | None
    probe_note: str | None  # why there is no probe, or what it was
    # Its site's link was emulated (linkem on the host): the TCP figures went through it,
    # the ping and the probe did not (measured before any server started).
    linked: bool = False


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def real_paths(remote: Any) -> list[RealPath]:
    """run.json's remote.paths as rows, in the inventory's order ([] for other runs)."""
    paths = remote.get("paths") if isinstance(remote, dict) else None
    if not isinstance(paths, dict):
        return []
    out = []
    for host, entry in paths.items():
        if not isinstance(entry, dict):
            continue
        sent, got = entry.get("sent"), entry.get("received")
        lost = (
            f"{sent - got} of {sent} lost"
            if isinstance(sent, int) and isinstance(got, int)
            else None
        )
        totals = entry.get("transfers") if isinstance(entry.get("transfers"), dict) else {}
        probe = entry.get("bandwidth") if isinstance(entry.get("bandwidth"), dict) else None
        if probe is None:
            note = "not probed (not its site's first secondary)"
        elif probe.get("error"):
            note = f"probe failed: {probe['error']}"
        else:
            note = f"{probe.get('tool', 'iperf3')}, {probe.get('seconds', '?')} s"
        retransmits = _number(totals.get("retransmits"))
        sent_segs = _number(totals.get("data_segs_out"))
        out.append(
            RealPath(
                host=str(host),
                site=str(entry.get("site") or ""),
                ping_min_s=_number(entry.get("rtt_min_s")),
                ping_avg_s=_number(entry.get("rtt_avg_s")),
                ping_lost=lost if "error" not in entry else f"ping failed: {entry['error']}",
                tcp_rtt_min_s=_number(totals.get("tcp_rtt_min_s")),
                transfers=int(totals.get("transfers") or 0),
                data_segs_out=int(sent_segs) if sent_segs is not None else None,
                retransmits=int(retransmits) if retransmits is not None else None,
                retransmit_pct=_number(totals.get("retransmit_pct")),
                bandwidth_bps=_number(probe.get("bits_per_second")) if probe else None,
                probe_retransmits=probe.get("retransmits") if probe else None,
                probe_note=note,
            )
        )
    return out


def under_links(paths: list[RealPath], checks: Iterable[Any]) -> list[RealPath]:
    """The paths whose site's link the run emulated marked `linked` (pure). `checks` are
    the link check's (report/link_checks.PathCheck): a path (a fleet's site, or "link" for
    one secondary's) was emulated where it has a configured RTT or linkem's counters; a
    check of the primary's TCP RTT alone is not."""
    sites = {c.path for c in checks if c.rtt_s or c.directions}
    return [replace(p, linked=p.site in sites or "link" in sites) for p in paths]
