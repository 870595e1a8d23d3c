"""A client's pull of a zone from the primary across a secondary's link: the own reader or
kdig, over the selected case's transport, its digest checked against the primary's."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.core.transport import Transport
from harness.measure.protocol import Pulled
from harness.xfr import PullResult, TsigKey
from harness.xfr.kdig import kdig_pull
from harness.xfr.pull import xot_context
from harness.xfr.rrsum import ZoneSum
from harness.xfr.secrets import TlsFiles
from harness.xfr.verify import check_copy, verify_copy

TLS_HOSTNAME = "primary.xfrbench.test"


def pull_zone(
    method: str,
    zone: str,
    address: str,
    netns: str | None,
    transport: Transport,
    *,
    tls_ca: Path | None,
    tsig: TsigKey | None,
    timeout: float,
) -> PullResult:
    """Pull `zone` (AXFR) from the primary at `address` from the namespace `netns` (None:
    this host's) with `method` ("own" or "kdig") over `transport`: of the group's `tsig`
    key and TLS CA, those it uses."""
    tsig, tls_ca = transport.secrets(tsig, tls_ca)
    if transport.tls and tls_ca is None:
        raise ValueError(f"a pull over {transport} needs the primary's TLS CA")
    options: dict[str, Any] = {
        "port": transport.port,
        "netns": netns,
        "tsig": tsig,
        "tls_hostname": TLS_HOSTNAME if transport.tls else None,
        "timeout": timeout,
    }
    if method == "own":
        # Digested after the timed read (not beside it): the figure is the reader's.
        tls = xot_context(tls_ca) if tls_ca is not None else None
        return verify_copy(address, zone, concurrent=False, tls=tls, **options)
    return kdig_pull(address, zone, xfr="axfr", tls_ca=tls_ca, digest="rrsum", **options)


def pulled(result: PullResult, reference: ZoneSum, started_at: float) -> Pulled:
    """A pull's result as the protocol keeps it, its copy checked against `reference`;
    `started_at`: its start on the bench's wall clock."""
    phases = {
        k: v
        for k, v in (
            ("connect", result.connect_s),
            ("tls", result.tls_s),
            ("first_byte", result.first_byte_s),
        )
        if v is not None
    }
    return Pulled(
        ok=result.ok,
        error=result.error,
        serial=result.serial or 0,
        records=result.records,
        bytes=result.bytes,
        messages=result.messages,
        duration_s=result.duration_s,
        started_at=started_at,
        phases=phases,
        digest_matches=result.ok and check_copy(reference, result) is None,
    )


def client_pull(
    method: str,
    zone: str,
    address: str,
    netns: str | None,
    transport: Transport,
    *,
    tls_files: TlsFiles | None,
    tsig: TsigKey | None,
    timeout: float,
    reference: ZoneSum,
) -> Pulled:
    """pull_zone from a namespace over `transport`, with the group's TLS files and key, as
    the protocol keeps it."""
    tls_ca = tls_files.ca_cert if tls_files else None
    result = pull_zone(
        method, zone, address, netns, transport, tls_ca=tls_ca, tsig=tsig, timeout=timeout
    )
    return pulled(result, reference, result.started_at or time.time())
