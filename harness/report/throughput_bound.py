"""How close to the bound (pure): per case (and fleet site), the median throughput of the
transfers against their median model bound, whether the zone is long enough (at least
``STEADY_BDPS`` bandwidth-delay products) for the bound to apply, and the congestion control,
windows and buffers that set it.

One of the first screen's answers: ``data.build_report_data`` calls ``bound_rows`` with the
parsed records and case.json files, and the renderers (HTML, terminal) only format the
result.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from harness.core.terms import SERVER_TO_SERVER
from harness.report.link_checks import CaseLinks, case_links
from harness.results.meta import CaseMeta
from harness.results.model import TransferRecord
from harness.results.summary import transfer_rate

STEADY_BDPS = 10.0  # a transfer of at least this many BDPs is long enough to judge a bound
BOUND_NAMES = ("rate", "receive_window", "receive_buffer", "send_window", "mathis", "pftk")


def _sysctl(meta: CaseMeta | None, host: str, key: str) -> str | None:
    if meta is None:
        return None
    hosts = meta.testbed.get("hosts") if isinstance(meta.testbed, dict) else None
    entry = hosts.get(host) if isinstance(hosts, dict) else None
    values = entry.get("sysctls") if isinstance(entry, dict) else None
    value = values.get(key) if isinstance(values, dict) else None
    return str(value) if value is not None else None


def _buffer_max(text: str | None) -> int | None:
    """The max of a "min default max" tcp_rmem/tcp_wmem triple."""
    parts = (text or "").split()
    return int(parts[-1]) if len(parts) == 3 and parts[-1].isdigit() else None


@dataclass
class BoundRow:
    case: str
    site: str | None
    n: int  # transfers with a throughput
    bytes: float  # median zone bytes per transfer
    throughput_bps: float  # median bytes x 8 / (served - connect), or / duration
    timed_from: str  # "connect" or "trigger": what the throughput's clock starts at
    bound_bps: float | None  # median model bound
    limited_by: str | None
    bounds_bps: dict[str, float]  # every named bound, median
    rtt_s: float | None  # configured path RTT
    bdp_bytes: float | None  # bound x RTT / 8
    bdps: float | None  # zone bytes / BDP
    steady: bool  # at least STEADY_BDPS: long enough for the bound to apply
    sender_cc: str | None  # the primary's congestion control (it sends the zone)
    receiver_cc: str | None  # the secondary's connection, as sampled
    advertised_window: int | None  # largest window the secondary advertised (median)
    receive_buffer: int | None  # secondary's tcp_rmem max
    send_buffer: int | None  # primary's tcp_wmem max

    @property
    def label(self) -> str:
        return self.case if self.site is None else f"{self.case} @ {self.site}"

    @property
    def ratio(self) -> float | None:
        return self.throughput_bps / self.bound_bps if self.bound_bps else None


def _transfer_rate(record: TransferRecord) -> tuple[float, str] | None:
    """summary.transfer_rate, and what its clock started at."""
    rate = transfer_rate(record)
    if rate is None:
        return None
    connect = record.phases.get("connect")
    timed = connect is not None and float(record.duration_s or 0) > connect
    return rate, "connect" if timed else "trigger"


def bound_rows(
    records: Iterable[TransferRecord], metas: dict[str, CaseMeta], *, steady: float = STEADY_BDPS
) -> list[BoundRow]:
    """Per case (and site): median throughput against the median model bound, whether the
    zone is long enough (at least `steady` BDPs) for the bound to apply, and the congestion
    control and buffers that set the bound."""
    groups: dict[tuple[str, str | None], list[TransferRecord]] = {}
    for record in records:
        if record.method == SERVER_TO_SERVER and record.counts and record.bytes:
            groups.setdefault((record.case, record.site), []).append(record)
    out = []
    for (case, site), items in groups.items():
        rated = [(r, got) for r in items if (got := _transfer_rate(r)) is not None]
        if not rated:
            continue
        meta = metas.get(case)
        links = case_links(meta) if meta is not None else CaseLinks({}, None, {})
        host = (
            items[0].host
            if items[0].host in links.hosts or not links.hosts
            else next(iter(links.hosts))
        )
        # The bound of a transfer whose connection was watched holds the window the
        # secondary really advertised; the others only tcp_rmem's (a fleet watches one
        # secondary per site). Mixing both would give a median of neither.
        watched = [r for r in items if "receive_buffer" in r.bound]
        named: dict[str, list[float]] = {}
        for record in watched or items:
            for key, value in record.bound.items():
                if isinstance(value, int | float) and value > 0:
                    named.setdefault(key, []).append(float(value))
        bounds = {key: statistics.median(values) for key, values in named.items()}
        model = bounds.pop("model", None)
        limited = next((k for k in BOUND_NAMES if model and bounds.get(k) == model), None)
        rtt_value = items[0].extra.get("path_rtt_s")
        rtt = float(rtt_value) if isinstance(rtt_value, int | float) else links.rtt_s(host)
        size = statistics.median(float(r.bytes or 0) for r in items)
        bdp = model * rtt / 8 if model and rtt else None
        windows = [
            int(tcp["rcv_wnd_max"])
            for r in items
            if isinstance(tcp := r.extra.get("tcp"), dict) and tcp.get("rcv_wnd_max")
        ]
        ccs = {
            str(tcp["congestion"])
            for r in items
            if isinstance(tcp := r.extra.get("tcp"), dict) and tcp.get("congestion")
        }
        froms = {how for _, (_, how) in rated}
        out.append(
            BoundRow(
                case=case,
                site=site,
                n=len(rated),
                bytes=size,
                throughput_bps=statistics.median(rate for _, (rate, _) in rated),
                timed_from="connect" if froms == {"connect"} else "trigger",
                bound_bps=model,
                limited_by=limited,
                bounds_bps=bounds,
                rtt_s=rtt,
                bdp_bytes=bdp,
                bdps=size / bdp if bdp else None,
                steady=bool(bdp and size / bdp >= steady),
                sender_cc=_sysctl(meta, "primary", "net.ipv4.tcp_congestion_control"),
                receiver_cc=ccs.pop() if len(ccs) == 1 else None,
                advertised_window=int(statistics.median(windows)) if windows else None,
                receive_buffer=_buffer_max(_sysctl(meta, host, "net.ipv4.tcp_rmem")),
                send_buffer=_buffer_max(_sysctl(meta, "primary", "net.ipv4.tcp_wmem")),
            )
        )
    return out
