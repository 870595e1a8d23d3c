"""The real paths between an inventory's primary and its secondaries, measured and stored
in run.json's remote.paths: their round trip (ping from each secondary), a brief bandwidth
probe from the primary to each site's first secondary (iperf3, the primary sending, as a
transfer does), and the loss seen as retransmits by the primary's TCP over the run's
transfers (`add_transfer`, from each record's extra.path; remote/pathwatch.py counts them).

The probe loads the path for PROBE_SECONDS per site, one site after the other, before any
server starts; it needs TCP port IPERF_PORT open from the secondaries to the primary (a
probe that cannot run says why in its entry and stops nothing).
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.inventory import Inventory

PROBE_SECONDS = 3
IPERF_PORT = 5201
PING = re.compile(
    r"(?P<sent>\d+) packets transmitted, (?P<got>\d+) received.*?"
    r"(?:= (?P<min>[\d.]+)/(?P<avg>[\d.]+)/(?P<max>[\d.]+)/(?P<mdev>[\d.]+) ms)?$",
    re.S,
)


def parse_ping(text: str) -> dict[str, Any]:
    """ping -q's summary: packets and the round trip's min/avg/max/mdev in seconds (pure)."""
    match = PING.search(text.strip())
    if not match:
        return {"error": text.strip()[-200:]}
    out: dict[str, Any] = {"sent": int(match["sent"]), "received": int(match["got"])}
    for key in ("min", "avg", "max", "mdev"):
        if match[key] is not None:
            out[f"rtt_{key}_s"] = round(float(match[key]) / 1000, 6)
    return out


def parse_iperf(text: str) -> dict[str, Any]:
    """iperf3 -J of a reverse test (the server sends): bits per second received, the
    sender's retransmits, the test's seconds and iperf3's version (pure)."""
    try:
        data = json.loads(text)
    except ValueError:
        return {"error": text.strip()[-200:] or "no output"}
    if not isinstance(data, dict):
        return {"error": "not iperf3's JSON"}
    try:
        received, sent = data["end"]["sum_received"], data["end"]["sum_sent"]
    except (KeyError, TypeError):
        return {"error": str(data.get("error") or "iperf3 gave no result")}
    return {
        "bits_per_second": round(float(received["bits_per_second"])),
        "seconds": round(float(received["seconds"]), 3),
        "retransmits": sent.get("retransmits"),
        "tool": str(data.get("start", {}).get("version", "iperf3")),
        "direction": "primary to secondary",
    }


def probe_targets(inventory: Inventory) -> list[str]:
    """Each site's first secondary, in the inventory's order."""
    return [hosts[0].name for hosts in inventory.sites().values()]


def probe_bandwidth(inventory: Inventory, channel: Any) -> dict[str, dict[str, Any]]:
    """iperf3 for PROBE_SECONDS from the primary to each site's first secondary, one at a
    time; `channel(name)` is the host's agent channel."""
    primary = inventory.primary
    out: dict[str, dict[str, Any]] = {}
    for name in probe_targets(inventory):
        host = inventory.host(name)
        try:
            channel(primary.name).call("iperf_serve", address=primary.address, port=IPERF_PORT)
            argv = ["iperf3", "-c", primary.address, "-p", str(IPERF_PORT), "-B", host.address,
                    "-t", str(PROBE_SECONDS), "-R", "-J"]  # fmt: skip
            got = channel(name).call("run", wait=PROBE_SECONDS + 30, argv=argv,
                                     timeout=PROBE_SECONDS + 20)  # fmt: skip
            out[name] = parse_iperf(got["output"])
        except Exception as exc:  # a probe that cannot run is said, and stops nothing
            out[name] = {"error": str(exc)[-300:]}
        finally:
            channel(primary.name).call("iperf_stop")
    return out


def add_transfer(totals: dict[str, dict[str, Any]], host: str | None, path: Any) -> None:
    """A record's extra.path (its repeat's counts on the primary) into the run's totals
    per secondary: segments sent, retransmitted, the least RTT."""
    if not host or not isinstance(path, dict):
        return
    entry = totals.setdefault(
        host, {"transfers": 0, "data_segs_out": 0, "retransmits": 0, "tcp_rtt_min_s": None}
    )
    entry["transfers"] += 1
    entry["data_segs_out"] += int(path.get("data_segs_out") or 0)
    entry["retransmits"] += int(path.get("retransmits") or 0)
    sent = entry["data_segs_out"]
    entry["retransmit_pct"] = round(100 * entry["retransmits"] / sent, 4) if sent else None
    rtt = path.get("rtt_ms_min")
    if isinstance(rtt, int | float):
        seconds = rtt / 1000
        low = entry["tcp_rtt_min_s"]
        entry["tcp_rtt_min_s"] = round(seconds if low is None else min(low, seconds), 6)


def measure_paths(inventory: Inventory, channel: Any) -> dict[str, Any]:
    """Each secondary's round trip to the primary (ping, seen from the secondary's host)
    and, for each site's first secondary, the bandwidth probe."""
    primary = inventory.primary
    out: dict[str, Any] = {}
    for host in inventory.secondaries:
        got = channel(host.name).call("ping", wait=30, address=primary.address)
        out[host.name] = {"to": primary.name, "site": host.site, **parse_ping(got["output"])}
    for name, probe in probe_bandwidth(inventory, channel).items():
        out[name]["bandwidth"] = probe
    return out
