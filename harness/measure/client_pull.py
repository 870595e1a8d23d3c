"""A client's pull of a zone from the primary across a secondary's link: the own reader or
kdig, over the selected case's transport, its digest checked against the primary's."""

from __future__ import annotations

import time
from typing import Any

from harness.measure.protocol import Pulled
from harness.xfr import TsigKey
from harness.xfr.kdig import kdig_pull
from harness.xfr.pull import xot_context
from harness.xfr.rrsum import ZoneSum
from harness.xfr.secrets import TlsFiles
from harness.xfr.verify import check_copy, verify_copy

TLS_HOSTNAME = "primary.xfrbench.test"


def client_pull(
    method: str,
    zone: str,
    address: str,
    netns: str | None,
    *,
    tls_files: TlsFiles | None,
    tsig: TsigKey | None,
    timeout: float,
    reference: ZoneSum,
) -> Pulled:
    """Pull `zone` from the primary at `address` from the namespace `netns` with `method`
    ("own" or "kdig"), with TLS when `tls_files` and TSIG when `tsig`."""
    options: dict[str, Any] = {
        "port": 853 if tls_files else 53,
        "netns": netns,
        "tsig": tsig,
        "tls_hostname": TLS_HOSTNAME if tls_files else None,
        "timeout": timeout,
    }
    if method == "own":
        # Digested after the timed read (not beside it): the figure is the reader's.
        tls = xot_context(tls_files.ca_cert) if tls_files else None
        result = verify_copy(address, zone, concurrent=False, tls=tls, **options)
    else:
        ca = tls_files.ca_cert if tls_files else None
        result = kdig_pull(address, zone, xfr="axfr", tls_ca=ca, digest="rrsum", **options)
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
        started_at=result.started_at or time.time(),
        phases=phases,
        digest_matches=result.ok and check_copy(reference, result) is None,
    )
