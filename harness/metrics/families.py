"""The metric families xfrbench exports: names, types, help, label names and units, the
transfer duration buckets, and the label values fixed in advance (TCP states, fleet figures,
loss verdicts). The live exporter and the OpenMetrics file both expose exactly these.

Naming (base units, ``_total`` counters, ``promtool check metrics`` clean):
- Throughput and model bounds are in bytes per second, not bits: Prometheus' base unit for
  information is the byte and promtool's linter rejects ``_bits_``. Dashboards multiply by 8.
- A transfer's duration is a histogram (``xfrbench_transfer_duration_seconds``) plus a gauge
  holding the last one (``xfrbench_transfer_last_duration_seconds``): a per-transfer value in
  the file cannot reuse the histogram's name with another type.
- Labels are bounded: run id, case, server kind, role, host, site, transport, xfr, method,
  TCP state, link direction. Never zone names, pids or repeats.
- ``host`` is the testbed host everywhere: a server's ("primary", "secondary", a fleet's
  "<site>-<n>"), a transfer's secondary, a link's secondary (or "uplink", the primary's
  shared access link). ``site`` is a fleet secondary's site, "" for the primary, for a
  single secondary and for the uplink. ``secondary`` keeps its meaning in transfers.jsonl
  (the secondary's server kind); the host is ``host`` in every family, so one
  ``host=~"seoul-.*"`` selector works across transfers, servers and links.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from prometheus_client.utils import floatToGoString

from harness.link.losscheck import Verdict

Kind = Literal["counter", "gauge", "histogram"]

# From a tiny zone on a LAN (ms) to a TLD over a long lossy link: the finite buckets reach
# past the longest timeout a shipped scenario sets (tld.toml, lfn.toml: 1800 s), so a slow
# transfer that still made it lands in a bucket and not only in +Inf.
DURATION_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1000,
    1800,
    3600,
)
# le label values, spelled as prometheus-client spells them, in the live and the file output.
BUCKET_LABELS = (*(floatToGoString(b) for b in DURATION_BUCKETS), "+Inf")

# The usual Linux TCP states: always exported (0 when absent) so that a state that empties
# shows as 0 and not as a gap.
TCP_STATES = (
    "established",
    "syn_sent",
    "syn_recv",
    "fin_wait1",
    "fin_wait2",
    "time_wait",
    "close",
    "close_wait",
    "last_ack",
    "listen",
    "closing",
)

# Label names of the transfer, server, link (one way) and case families.
T_LABELS = (
    "run_id",
    "case",
    "primary",
    "secondary",
    "host",
    "site",
    "transport",
    "xfr",
    "method",
)
S_LABELS = ("run_id", "case", "server", "role", "host", "site")
L_LABELS = ("run_id", "case", "host", "site", "direction")
C_LABELS = ("run_id", "case")
FLEET_STATS = ("first", "p50", "p95", "last")
FLEET_STATUSES = ("secondaries", "recorded", "served", "reconnected", "possibly_waited")
LOSS_VERDICTS = tuple(v.replace(" ", "_") for v in get_args(Verdict))


@dataclass(frozen=True)
class Family:
    """One metric family: ``name`` without ``_total`` for counters; ``unit`` is a suffix of
    ``name`` (OpenMetrics UNIT) or empty."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...]
    unit: str = ""


FAMILIES: tuple[Family, ...] = (
    Family(
        "xfrbench_run_info",
        "gauge",
        "The run this exporter reports on (value 1).",
        ("run_id", "scenario", "spec_hash"),
    ),
    Family(
        "xfrbench_transfer_duration_seconds",
        "histogram",
        "Duration of ok and verified transfers, as the method measures it.",
        T_LABELS,
        "seconds",
    ),
    Family(
        "xfrbench_transfer_last_duration_seconds",
        "gauge",
        "Duration of the last ok and verified transfer.",
        T_LABELS,
        "seconds",
    ),
    Family(
        "xfrbench_transfers",
        "counter",
        "Transfer attempts by result (ok = ok and verified; unchecked = a stream's serial "
        "before its last, served, its copy not checked).",
        (*T_LABELS, "result"),
    ),
    Family(
        "xfrbench_transfer_bytes",
        "counter",
        "Bytes moved by ok and verified transfers.",
        T_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_transfer_throughput_bytes_per_second",
        "gauge",
        "Throughput of the last ok and verified transfer (bytes from the secondary's "
        "connect to served, as the report's).",
        T_LABELS,
        "bytes_per_second",
    ),
    Family(
        "xfrbench_transfer_bound_bytes_per_second",
        "gauge",
        "Model bound on throughput, primary to secondary (model = the lowest that applies).",
        ("run_id", "case", "host", "site", "bound"),
        "bytes_per_second",
    ),
    Family(
        "xfrbench_server_cpu_seconds",
        "counter",
        "CPU time of the server since it started.",
        (*S_LABELS, "mode"),
        "seconds",
    ),
    Family(
        "xfrbench_server_memory_anon_bytes",
        "gauge",
        "Anonymous memory of the server (cgroup v2 anon, v1 rss, or RssAnon over its "
        "processes): its own heap, not the files it read.",
        S_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_server_memory_charged_bytes",
        "gauge",
        "Memory charged to the server's cgroup, page cache included.",
        S_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_server_memory_charged_peak_bytes",
        "gauge",
        "Peak of the memory charged to the server's cgroup since the server started, page "
        "cache included.",
        S_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_tcp_time_wait_sockets",
        "gauge",
        "TCP sockets in TIME_WAIT in the server's network namespace (sockstat).",
        S_LABELS,
    ),
    Family(
        "xfrbench_tcp_sockets",
        "gauge",
        "TCP sockets by state in the server's network namespace.",
        (*S_LABELS, "state"),
    ),
    Family(
        "xfrbench_ephemeral_ports_in_use",
        "gauge",
        "Local ports of the ephemeral range held by TCP sockets in the server's namespace.",
        S_LABELS,
    ),
    Family(
        "xfrbench_tcp_retransmitted_segments",
        "counter",
        "TCP segments retransmitted in the server's network namespace.",
        S_LABELS,
    ),
    Family(
        "xfrbench_tcp_timeouts",
        "counter",
        "TCP retransmission timeouts in the server's network namespace.",
        S_LABELS,
    ),
    Family(
        "xfrbench_network_transmit_bytes",
        "counter",
        "Bytes the server's network namespace sent on its links.",
        S_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_network_receive_bytes",
        "counter",
        "Bytes the server's network namespace received on its links.",
        S_LABELS,
        "bytes",
    ),
    Family(
        "xfrbench_link_packets",
        "counter",
        "Packets the emulated link passed or dropped (host: whose link, or uplink).",
        ("run_id", "case", "host", "direction", "verdict"),
    ),
    Family(
        "xfrbench_link_loss_configured_ratio",
        "gauge",
        "Loss rate the link's model should produce, in the last transfer's loss check.",
        L_LABELS,
        "ratio",
    ),
    Family(
        "xfrbench_link_loss_measured_ratio",
        "gauge",
        "Loss rate the link really applied during the last transfer (its random drops).",
        L_LABELS,
        "ratio",
    ),
    Family(
        "xfrbench_link_loss_check",
        "gauge",
        "Verdict of the last transfer's loss check (1 for the verdict given, 0 for others).",
        (*L_LABELS, "verdict"),
    ),
    Family(
        "xfrbench_fleet_propagation_seconds",
        "gauge",
        "Latest repeat: seconds from its first NOTIFY to any secondary (or command) until the "
        "first, median and 95th percentile (nearest rank over the whole fleet) and the last "
        "secondary served the new serial; absent while the fleet has not got there (not "
        "converged, or records still to come).",
        (*C_LABELS, "stat"),
        "seconds",
    ),
    Family(
        "xfrbench_fleet_secondaries",
        "gauge",
        "Latest repeat: secondaries in the fleet, those with a record so far, served "
        "(verified; converged when it equals secondaries), reconnected (opened more than one "
        "connection, by source port), possibly_waited (connected late after the SOA query: "
        "a guess, a busy CPU looks the same).",
        (*C_LABELS, "status"),
    ),
    Family(
        "xfrbench_fleet_refusals",
        "gauge",
        "Latest repeat: transfers the primary refused for want of a slot, counted in its "
        "log in its own words (BIND: 'request denied: quota reached'); absent where its "
        "server's wording is not known (not logged).",
        C_LABELS,
    ),
    Family(
        "xfrbench_stream_behind_serials",
        "gauge",
        "Change stream, live: serials the primary was given that the secondary does not serve yet.",
        ("run_id", "case", "host", "site"),
    ),
    Family(
        "xfrbench_stream_behind_seconds",
        "gauge",
        "Change stream, live: how long ago the oldest serial the secondary does not serve yet "
        "was put on the primary (0 when it serves the newest).",
        ("run_id", "case", "host", "site"),
        "seconds",
    ),
    Family(
        "xfrbench_fault_active",
        "gauge",
        "1 while a [[faults]] fault lasts (from the moment it began to the one it ended, as "
        "the fault flow acted), 0 otherwise: the dashboard's fault windows.",
        (*C_LABELS, "fault"),
    ),
    Family(
        "xfrbench_fault_heal_seconds",
        "gauge",
        "Latest faulted repeat: seconds from the fault's end until the secondary served the "
        "new serial, verified; absent when it did not heal (stuck) or was unaffected.",
        (*C_LABELS, "fault", "host", "site"),
        "seconds",
    ),
    Family(
        "xfrbench_fault_stuck",
        "gauge",
        "Latest faulted repeat: 1 when the secondary did not serve the new serial within "
        "the scenario's timeout after the fault's end, else 0.",
        (*C_LABELS, "fault", "host", "site"),
    ),
    Family(
        "xfrbench_catalog_members_served",
        "gauge",
        "Catalog zones, live: members of the catalog's latest version the consumer serves "
        "at their serial (of those the phase waits for: all of them after a start, the new "
        "ones after an add; not written while members are removed).",
        ("run_id", "case", "host", "site"),
    ),
    Family(
        "xfrbench_catalog_members_behind",
        "gauge",
        "Catalog zones, live: members the catalog's latest version asks of the consumer that "
        "it has not done yet: not served yet, or (a removal) still answered for.",
        ("run_id", "case", "host", "site"),
    ),
    Family(
        "xfrbench_primary_repeat_cpu_seconds",
        "gauge",
        "CPU the primary spent in the latest repeat (between its start and end marks).",
        C_LABELS,
        "seconds",
    ),
    Family(
        "xfrbench_primary_repeat_peak_connections",
        "gauge",
        "Most established TCP connections the primary held in the latest repeat.",
        C_LABELS,
    ),
    Family(
        "xfrbench_primary_repeat_transmit_bytes",
        "gauge",
        "Bytes the primary sent on its links in the latest repeat.",
        C_LABELS,
        "bytes",
    ),
)
