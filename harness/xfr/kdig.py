"""Zone transfers with Knot's ``kdig`` as the client, for comparison with the own reader.

``parse_kdig_output`` is a pure function over kdig's text (tested on captured output);
``kdig_pull`` runs kdig (inside the netns via ``ip netns exec``) and turns its statistics
into a ``PullResult``. What kdig's figures mean (kdig 3.2, ``process_xfr_packet``):
- "Received N B": the sum of DNS message sizes WITHOUT the 2-byte TCP length prefixes;
  ``PullResult.bytes`` adds 2 per message so that it compares with the own reader.
- "(M messages, R records)": R is the sum of ANCOUNT, the same convention as the own reader.
- "in T ms": from the moment the query was sent (after connect and TLS handshake) to the
  last message; ``duration_s`` is that figure, ``extra["wall_s"]`` the process's lifetime.
- kdig verifies the TSIG of the first response message only.

The TSIG secret goes to kdig in a key file of mode 0600 (``-k``), never on the command line.
kdig 3.2 offers no way to set ALPN: ``+tls`` is DoT as kdig knows it (BIND 9.18 answers
XoT over it; see the system tests).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.core.transport import DNS_PORT, XOT_PORT
from harness.xfr import PullResult, TsigKey, XfrKind
from harness.xfr.digest import zone_digest_dnspython
from harness.xfr.digest_pool import DigestFailed
from harness.xfr.zonefile_sum import axfr_text_file_sum

_RECEIVED = re.compile(
    r"^;; Received (?P<bytes>\d+) B(?: \((?P<messages>\d+) messages?, (?P<records>\d+) records?\))?"
)
_FROM = re.compile(
    r"^;; From (?P<server>\S+?)\((?P<proto>[A-Za-z0-9-]+)\) in (?P<time>[\d.]+) (?P<unit>ms|s)"
)
_DIAG = re.compile(r"^;; (?P<level>ERROR|WARNING): (?P<text>.*)$")
_RR = re.compile(r"^(?P<owner>\S+)\s+(?P<ttl>\d+)\s+(?P<cls>[A-Z0-9]+)\s+(?P<type>[A-Z0-9]+)\s")
_SOA_SERIAL = re.compile(r"\sSOA\s+\S+\s+\S+\s+(?P<serial>\d+)\s")
_HEAD_BYTES = 64 * 1024
_TAIL_BYTES = 64 * 1024


@dataclass
class KdigStats:
    """What one kdig transfer printed."""

    received_bytes: int | None = None
    messages: int | None = None
    records: int | None = None
    time_s: float | None = None
    server: str | None = None
    protocol: str | None = None  # TCP, TLS, ...
    first_serial: int | None = None  # serial of the first SOA (the server's current one)
    ixfr_style: str | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def parse_kdig_output(stdout: str, stderr: str = "") -> KdigStats:
    """Statistics and diagnostics from kdig's output (stdout may be just its head and tail:
    the statistics are the last lines, the first records tell the serial and IXFR style)."""
    stats = KdigStats()
    rr_types: list[str] = []
    for line in stdout.splitlines():
        if line.startswith(";;"):
            if m := _RECEIVED.match(line):
                stats.received_bytes = int(m["bytes"])
                if m["messages"] is not None:
                    stats.messages = int(m["messages"])
                    stats.records = int(m["records"])
            elif m := _FROM.match(line):
                stats.server = m["server"]
                stats.protocol = m["proto"]
                value = float(m["time"])
                stats.time_s = value / 1000 if m["unit"] == "ms" else value
            elif m := _DIAG.match(line):
                (stats.errors if m["level"] == "ERROR" else stats.warnings).append(m["text"])
            continue
        if len(rr_types) < 2 and (m := _RR.match(line)):
            rr_types.append(m["type"])
            if m["type"] == "SOA" and stats.first_serial is None:
                soa = _SOA_SERIAL.search(line + " ")
                if soa:
                    stats.first_serial = int(soa["serial"])
    for line in stderr.splitlines():
        if m := _DIAG.match(line.strip()):
            (stats.errors if m["level"] == "ERROR" else stats.warnings).append(m["text"])
    if len(rr_types) == 2:
        stats.ixfr_style = "incremental" if rr_types[1] == "SOA" else "axfr-style"
    return stats


def kdig_argv(
    address: str,
    zone: str,
    *,
    xfr: XfrKind,
    serial: int | None,
    port: int,
    netns: str | None,
    key_file: Path | None,
    tls: bool,
    tls_ca: Path | None,
    tls_hostname: str | None,
    timeout: float,
    kdig: str = "kdig",
) -> list[str]:
    """The command line (no secrets in it: the key is in ``key_file``)."""
    qtype = "AXFR" if xfr == "axfr" else f"IXFR={serial}"
    argv = [kdig, f"@{address}", "-p", str(port), zone, qtype]
    # +time is kdig's per-operation wait in whole seconds; the process gets a hard deadline.
    argv += [f"+time={max(1, int(timeout + 0.999))}", "+retry=0"]
    if key_file is not None:
        argv += ["-k", str(key_file)]
    if tls or tls_ca is not None or tls_hostname is not None:
        argv.append("+tls")
        if tls_ca is not None:
            argv.append(f"+tls-ca={tls_ca}")
        if tls_hostname is not None:
            argv.append(f"+tls-hostname={tls_hostname}")
    if netns is not None:
        argv = ["ip", "netns", "exec", netns, *argv]
    return argv


def _head_tail(path: Path) -> str:
    size = path.stat().st_size
    with path.open("rb") as fh:
        if size <= _HEAD_BYTES + _TAIL_BYTES:
            return fh.read().decode(errors="replace")
        head = fh.read(_HEAD_BYTES)
        fh.seek(size - _TAIL_BYTES)
        tail = fh.read()
    # Cut at line boundaries so that no half line is parsed.
    head = head[: head.rfind(b"\n") + 1]
    tail = tail[tail.find(b"\n") + 1 :]
    return (head + tail).decode(errors="replace")


def kdig_pull(
    address: str,
    zone: str,
    *,
    xfr: XfrKind = "axfr",
    serial: int | None = None,
    port: int | None = None,
    netns: str | None = None,
    tsig: TsigKey | None = None,
    tls: bool = False,
    tls_ca: Path | None = None,
    tls_hostname: str | None = None,
    timeout: float = 60.0,
    digest: bool | Literal["zonemd", "rrsum"] = False,
) -> PullResult:
    """Transfer ``zone`` with kdig and report its figures (see the module docstring).
    TLS is used when ``tls`` or a CA or hostname is given (port 853 by default then).
    ``digest``: compute the digest of kdig's printed records: True or "zonemd" for RFC 8976
    (loads the zone: for tests and spot checks, not for millions of records), "rrsum" for
    ``harness.xfr.rrsum`` (streams; compares with ``verify.verify_copy``)."""
    import dns.name

    zone_text = dns.name.from_text(zone).to_text()
    use_tls = tls or tls_ca is not None or tls_hostname is not None
    if port is None:
        port = XOT_PORT if use_tls else DNS_PORT
    result = PullResult(ok=False, xfr=xfr, zone=zone_text, method="client-pull-kdig")
    if xfr == "ixfr" and serial is None:
        result.error = "an IXFR pull needs serial= (the client's current serial)"
        return result
    binary = shutil.which("kdig")
    if binary is None:
        result.error = "kdig not found (Debian package knot-dnsutils)"
        return result
    with tempfile.TemporaryDirectory(prefix="xfrbench-kdig-") as tmp:
        tmpdir = Path(tmp)
        key_file = None
        if tsig is not None:
            key_file = tmpdir / "tsig.key"
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(tsig.kdig_keyfile_text())
        argv = kdig_argv(
            address,
            zone_text,
            xfr=xfr,
            serial=serial,
            port=port,
            netns=netns,
            key_file=key_file,
            tls=use_tls,
            tls_ca=tls_ca,
            tls_hostname=tls_hostname,
            timeout=timeout,
            kdig=binary,
        )
        out_path = tmpdir / "stdout.txt"
        result.started_at = time.time()
        t0 = time.monotonic()
        with out_path.open("wb") as out:
            try:
                proc = subprocess.run(
                    argv, stdout=out, stderr=subprocess.PIPE, timeout=timeout, check=False
                )
            except subprocess.TimeoutExpired:
                result.error = (
                    f"timeout after {time.monotonic() - t0:.1f} s waiting for kdig "
                    f"to transfer {zone_text} from {address}#{port}"
                )
                result.extra["wall_s"] = time.monotonic() - t0
                return result
        wall = time.monotonic() - t0
        text = _head_tail(out_path)
        stats = parse_kdig_output(text, proc.stderr.decode(errors="replace"))
        result.extra.update(
            wall_s=wall,
            returncode=proc.returncode,
            kdig_bytes=stats.received_bytes,
            protocol=stats.protocol,
        )
        result.messages = stats.messages or 0
        result.records = stats.records or 0
        if stats.received_bytes is not None:
            result.bytes = stats.received_bytes + 2 * result.messages
        result.duration_s = stats.time_s
        result.serial = stats.first_serial
        if xfr == "ixfr":
            result.ixfr_style = "up-to-date" if stats.records == 1 else stats.ixfr_style
        if proc.returncode != 0 or stats.errors or stats.messages is None:
            reason = "; ".join(stats.errors) or f"kdig exited with {proc.returncode}"
            result.error = f"kdig: {reason}"
            return result
        result.ok = True
        full_zone = xfr == "axfr" or result.ixfr_style == "axfr-style"
        if digest == "rrsum" and full_zone:
            try:
                result.digest = axfr_text_file_sum(out_path, zone_text).text
            except DigestFailed as exc:
                result.ok = False
                result.error = f"kdig: cannot digest its output: {exc}"
        elif digest and full_zone:
            result.digest = _digest_of_output(out_path, zone_text)
    return result


def _digest_of_output(path: Path, zone: str) -> str:
    import dns.zone

    # kdig prints absolute owners with TTL and class: a zone file with ';;' comments (the
    # closing SOA repeats the first and merges with it).
    loaded = dns.zone.from_file(str(path), origin=zone, relativize=False, check_origin=True)
    return zone_digest_dnspython(loaded)
