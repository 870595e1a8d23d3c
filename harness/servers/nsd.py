"""NSD: everything the harness knows about it.

Facts that shape transfers: xfrd-tcp-max 128 sockets, pipelining only once all
are busy; xfrd-reload-timeout 1 s (a secondary serves about 1 s after the transfer); XoT as
secondary from 4.3.7, as primary with the "dot" ALPN from 4.11.1; IXFR out from zone-file
differences (create-ixfr) from 4.6. NSD 4.6 logs the commit of an incoming transfer only,
with no duration or size.

Failures (FAILURES): one line per attempt, "xfrd: connect <addr> failed: <strerror>"
(connect() failed at once, as it does when no port is free; names no zone), "<zone>: Could
not tcp connect to <addr>: <strerror>" (the non-blocking connect failed later, as a refused,
unreachable or kernel-timed-out one does), "xfrd: zone <zone> received error code <rcode>
from <addr>" (the primary answered with an error), or "xfrd: failed reading tcp <strerror>"
(the connection failed part way; names no zone or peer; over XoT after "ssl_read returned
error 5 ..." and "tls read sz: ..."). 4.6.1 logs neither the expiry of
xfrd's own timer nor its retries (only in debug builds): its retry count is None, "not
logged", and so is its timed_out count unless the kernel's connect timeout was logged (then
a floor). 0 would say nothing failed that way.

As a primary, NSD 4.6.1 never refuses a transfer for want of a slot and never logs one: at
tcp-count connections its server process stops accepting, and further connections wait in
the kernel's accept backlog, with nothing logged at any verbosity (tcp-reject-overflow, which
the harness does not set, would close them, silently too). A secondary that gave up while
queued shows later only as "error: failed writing to tcp: Broken pipe" (verbosity 2 and up),
naming neither the client nor the zone. That is what a refusal count of None, "not logged",
means for an NSD primary.

A secondary's copy on disk (disk_copy): its zone file, written only when asked
(zonefiles-write 0). `nsd-control write` queues the write for the next reload, which it
starts, and returns; the reload process writes the zone, if it changed, to "<file>~" and
renames it over the file (namedb.c). NSD writes an RFC 1035 master file ($ORIGIN, owners
left out, the SOA in parentheses): the harness rewrites it one record per line to sum it.
"""

from __future__ import annotations

import re
from datetime import tzinfo
from pathlib import Path
from typing import ClassVar

from harness.servers.base import EVERY_SWITCH, Server, parse_semver, zone_name
from harness.servers.capabilities import Capabilities, Footprint, Support
from harness.servers.facts import LoggedTransfer, Pacing
from harness.servers.failures import FailureCategory, FailureWording, local_epoch
from harness.servers.setup import ServerSetup
from harness.servers.snippet import Setting, clause_settings, indented
from harness.xfr.zone_copy import DiskCopy

_COMMIT = re.compile(
    r"^\[(?P<at>[^\]]+)\] nsd\[\d+\]: \w+: xfrd: zone (?P<zone>\S+) committed \"received update "
    r"to serial (?P<serial>\d+) at \S+ from (?P<peer>\S+?)\"?(?:\s|$)"
    r"(?P<tsig>TSIG verified with key )?"
)


# --- failures, in this server's own wording (harness/servers/failures.py) ---

# log-time-ascii: "[YYYY-MM-DD HH:MM:SS.mmm]" in local time, no offset.
_NSD_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\] ")


def nsd_timestamp(line: str, tz: tzinfo | None = None, near: float | None = None) -> float | None:
    """`near` is unused: the stamp has its year."""
    match = _NSD_STAMP.match(line)
    if not match:
        return None
    return local_epoch(match[1], "%Y-%m-%d %H:%M:%S.%f", tz)


NSD_ATTEMPTS = (
    # xfrd-tcp.c: connect() failed at once (no zone named).
    re.compile(r"\]: error: xfrd: connect \S+ failed: (?P<reason>.+)$"),
    # xfrd-tcp.c: the non-blocking connect failed (SO_ERROR), for this zone. The kernel's
    # connect timeout ("Connection timed out") comes only if it is shorter than xfrd's own
    # timer (tcp-timeout, 120 s; the kernel's with tcp_syn_retries 6 is about 127 s).
    re.compile(r"\]: error: \S+: Could not tcp connect to \S+: (?P<reason>.+)$"),
    # xfrd.c: the primary answered the transfer with an error rcode, in NSD's rcode2str words
    # (NOTAUTH is "SERVER NOT AUTHORITATIVE FOR ZONE", SERVFAIL stays "SERVFAIL").
    re.compile(r"\]: error: xfrd: zone \S+ received error code (?P<reason>.+) from \S+$"),
    # xfrd-tcp.c conn_read(): the transfer's connection failed part way (names no zone or
    # peer). A read that returns 0 (the primary closed: end of file) is worded with a stale
    # errno, "Operation now in progress" (EINPROGRESS, left by the non-blocking connect).
    re.compile(r"\]: error: xfrd: failed reading tcp (?P<reason>.+)$"),
)
NSD_REASONS: dict[str, FailureCategory] = {  # strerror() texts and rcodes
    "Cannot assign requested address": "address_not_available",
    "Connection refused": "refused",
    "SERVER NOT AUTHORITATIVE FOR ZONE": "refused",
    "Connection timed out": "timed_out",
    # EHOSTUNREACH: an ICMP host unreachable (100 % loss gives timeouts instead).
    "No route to host": "unreachable",
    # Other failures by their own words: "SERVFAIL"; "Operation now in progress" (the end of
    # file above); "Connection reset by peer" (the primary reset the connection part way).
}
NSD_FIXED: tuple[tuple[re.Pattern[str], FailureCategory], ...] = ()
NSD_FOLLOW_UPS = (
    # At verbosity 2 (the harness's), the reset before "xfrd: failed reading tcp ...".
    re.compile(r"\]: error: tcp read sz: .+$"),
    # Over XoT, told twice (tests/fixtures/failures/nsd-reset.log).
    re.compile(r"\]: error: ssl_read returned error \d+ with received -?\d+$"),
    re.compile(r"\]: error: tls read sz: .+$"),
)

FAILURES = FailureWording(
    NSD_ATTEMPTS,
    NSD_REASONS,
    NSD_FIXED,
    NSD_FOLLOW_UPS,
    nsd_timestamp,
    0.001,
    # 4.6.1 logs no retry, and gives a transfer up when xfrd's own timer fires (tcp-timeout,
    # 120 s) with a debug line only; the kernel's connect timeout it does log comes only when
    # that is shorter (about 127 s at the default tcp_syn_retries 6). Its timeouts: a floor.
    unlogged=frozenset({"timed_out", "retry"}),
)


class Nsd(Server):
    kind = "nsd"
    title = "NSD"
    daemon = "nsd"
    config_name = "nsd.conf"
    log_name = "nsd.log"
    version_argv = ("-v",)
    version_patterns = (r"NSD version (\d+\.\d+\.\d+)",)
    options: ClassVar[dict[str, type]] = {
        "xfrd-tcp-max": int,
        "xfrd-tcp-pipeline": int,
        "tcp-count": int,
        "server-count": int,
        "xfrd-reload-timeout": int,
        "tcp-timeout": int,
        # The primary's IXFR history, per zone: how many versions it keeps (default 5) and
        # their bytes at most (default 1048576, 0: unlimited).
        "ixfr-number": int,
        "ixfr-size": int,
    }
    zone_options = frozenset({"ixfr-number", "ixfr-size"})
    failures = FAILURES
    # No line of a NSD primary refusing a transfer for want of a slot is captured yet
    # (servers/refusals.py): its refusals are "not logged". Set a RefusalWording here.
    refusals = None
    # `nsd-control reconfig` makes every transport switch of an NSD started with the TLS
    # settings (the template renders them whenever the group has XoT: tls_known): 32 of 32
    # in the harness's run 20261125T171331Z-423c4c (visits started on tcp-tsig, tcp and
    # xot-tsig), 24 of 24 in research-switch/REPORT.md. It never applies new tls-auth
    # clauses or a CA bundle, so without them every switch into XoT failed there (0 of 27).
    # AXFR <-> IXFR: the primary's xfer-out kinds, run 20261125T170854Z-228a6d.
    reconfig_switches = EVERY_SWITCH
    reconfig_switches_xfr = True
    # With zonefiles-write 0 a restarted NSD has no zone; after failed attempts, with its
    # xfrd.state kept it served nothing until the next NOTIFY, 60 s (research "remedies"
    # #11); without it, it transferred at once. (After good transfers it did either way.)
    restart_forgets = ("xfrd.state",)
    # RSS of its processes: 205 MiB at 500 k records (tld); per zone not measured, taken
    # as Knot's.
    footprint = Footprint(base_mib=20, record_bytes=420, zone_bytes=1_500)
    packages = ("nsd",)
    services = ("nsd",)
    keeps_disk_copy = True
    snippet_place = "into its server: clause"
    snippet_owned: ClassVar[dict[str, str]] = {
        **dict.fromkeys(
            (
                "ip-address",
                "tls-service-key",
                "tls-service-pem",
                "tls-port",
                "tls-cert-bundle",
                "do-ip6",
            ),
            "it listens where the testbed put it, with the run's TLS files",
        ),
        **dict.fromkeys(
            (
                "username",
                "chroot",
                "zonesdir",
                "database",
                "zonelistfile",
                "pidfile",
                "xfrdfile",
                "xfrdir",
                "logfile",
            ),
            "its files live in the run's working folder",
        ),
        **dict.fromkeys(
            ("log-time-ascii", "verbosity", "zonefiles-write"),
            "the harness parses its log and decides when copies are written",
        ),
    }

    @classmethod
    def capabilities(cls, version: str) -> Capabilities:
        v = parse_semver(version)
        caveats = ()
        if (4, 0, 0) <= v < (4, 7, 0):
            caveats = (f"NSD {version} has a known XoT IXFR hang on lossy links (fixed in 4.7.0)",)
        return Capabilities(
            # As primary it sends no ALPN before 4.11.1, so BIND (which requires "dot")
            # refuses it.
            xot_primary=Support.since(
                v, (4, 11, 1), f"NSD {version} serves XoT without the 'dot' ALPN (fixed in 4.11.1)"
            ),
            xot_secondary=Support.since(v, (4, 3, 7), f"NSD {version} has no XoT (added in 4.3.7)"),
            ixfr_primary=Support.since(
                v,
                (4, 6, 0),
                f"NSD {version} cannot serve IXFR from zone-file differences (needs 4.6)",
            ),
            ixfr_secondary=Support(True),
            tsig=Support(True),
            # request-xfr: AXFR; as a primary, store-ixfr (reconfig: not yet tried).
            axfr_only_secondary=Support(True),
            withholds_ixfr_primary=Support(
                False, f"NSD {version} as a primary: no switch of IXFR off by reconfig was tried"
            ),
            caveats=caveats,
        )

    @classmethod
    def switches_by_reconfig(
        cls, started: ServerSetup, before: ServerSetup, after: ServerSetup
    ) -> bool:
        if after.tls is not None and (started.tls or started.tls_known) is None:
            return False  # reconfig would point it at a tls-auth it never loaded
        return super().switches_by_reconfig(started, before, after)

    @classmethod
    def parse_log(cls, text: str) -> list[LoggedTransfer]:
        out: list[LoggedTransfer] = []
        for line in text.splitlines():
            match = _COMMIT.match(line)
            if match:
                out.append(
                    LoggedTransfer(
                        "nsd",
                        "in",
                        zone_name(match["zone"]),
                        None,
                        int(match["serial"]),
                        None,
                        None,
                        None,
                        None,
                        match["at"],
                        match["peer"],
                        nsd_timestamp(line),
                        match["tsig"] is not None,
                    )
                )
        return out

    @classmethod
    def snippet_settings(cls, text: str) -> list[Setting]:
        return clause_settings(text, "server")

    @classmethod
    def snippet_sections(cls, text: str) -> dict[str, str]:
        lines = [line for line in text.splitlines() if line.strip() != "server:"]
        return {"server": indented("\n".join(line.strip() for line in lines), 4)}

    @classmethod
    def coo_problem(cls, version: str) -> str | None:
        """A move needs two consumer catalogs; NSD processes one (with more configured, it
        processes none)."""
        return (
            f"NSD {version} consumes one catalog only (with more than one configured it "
            "processes none), and a change of ownership needs two; use a BIND 9.18+ consumer"
        )

    @classmethod
    def catalog_consumer_problem(cls, version: str) -> str | None:
        """NSD 4.9 added catalog consumer zones (`catalog: consumer` with a
        catalog-member-pattern, servers/nsd/nsd.conf.j2), one catalog per server; 4.6
        (bookworm's) has none."""
        if parse_semver(version) < (4, 9, 0):
            return (
                f"NSD {version} has no catalog zones (NSD 4.9 added catalog consumer zones); "
                "use a BIND or Knot secondary, or NSD 4.9 or later"
            )
        return None

    def check_config_argv(self) -> list[str]:
        return [self._tool("nsd-checkconf"), str(self.config)]

    @classmethod
    def peer_is(cls, peer: str | None, address: str) -> bool:
        return (peer or "") == address or (peer or "").startswith(f"{address}@")

    def folders(self) -> list[tuple[Path, int]]:
        return [*super().folders(), (self.setup.workdir / "xfr", 0o755)]

    def _render_files(self) -> list[Path]:
        return [self._render("nsd/nsd.conf.j2", self.config)]

    def argv(self) -> list[str]:
        return [str(self.binary), "-d", "-c", str(self.config)]

    def control(self, *command: str) -> list[str]:
        return [self._tool("nsd-control"), "-c", str(self.config), *command]

    def reload_argv(self, zone: str) -> list[str]:
        return self.control("reload", zone)

    def reconfig_argv(self) -> list[str]:
        return self.control("reconfig")

    def retransfer_argv(self, zone: str) -> list[str]:
        return self.control("force_transfer", zone)

    def refresh_argv(self, zone: str) -> list[str]:
        return self.control("transfer", zone)

    def zone_status_argv(self, zone: str) -> list[str] | None:
        return self.control("zonestatus", zone)

    def disk_copy(self, zone: str) -> DiskCopy | None:
        return DiskCopy(self.zone_file(zone), "master", tuple(self.control("write", zone)))

    def notify_argv(self, zone: str) -> list[str] | None:
        return self.control("notify", zone)

    def pacing(self) -> tuple[Pacing, ...]:
        """A secondary's xfrd, after a reload, waits xfrd-reload-timeout (1 s by default)
        before it triggers the next: a transfer within it is served at its end."""
        if self.setup.role != "secondary":
            return ()
        seconds = int(self.setup.options.get("xfrd-reload-timeout", 1))
        if seconds <= 0:  # -1: no reload after a transfer (never served); 0: no pause
            return ()
        return (Pacing(("served",), float(seconds), f"xfrd-reload-timeout {seconds}"),)
