"""A client's pull of a zone from a server (the own reader or kdig), from a network
namespace or this host: the place operation `pull_from` (place/), the client pulls of
measure/client_pull.py and the agent's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.xfr import PullResult, TsigKey
from harness.xfr.kdig import kdig_pull
from harness.xfr.pull import xot_context
from harness.xfr.verify import verify_copy

TLS_HOSTNAME = "primary.xfrbench.test"


def pull_zone(
    method: str,
    zone: str,
    address: str,
    netns: str | None,
    *,
    tls_ca: Path | None,
    tsig: TsigKey | None,
    timeout: float,
) -> PullResult:
    """Pull `zone` (AXFR) from the primary at `address` from the namespace `netns` (None:
    this host's) with `method` ("own" or "kdig"), over XoT when `tls_ca` and with TSIG
    when `tsig`."""
    options: dict[str, Any] = {
        "port": 853 if tls_ca else 53,
        "netns": netns,
        "tsig": tsig,
        "tls_hostname": TLS_HOSTNAME if tls_ca else None,
        "timeout": timeout,
    }
    if method == "own":
        # Digested after the timed read (not beside it): the figure is the reader's.
        tls = xot_context(tls_ca) if tls_ca else None
        return verify_copy(address, zone, concurrent=False, tls=tls, **options)
    return kdig_pull(address, zone, xfr="axfr", tls_ca=tls_ca, digest="rrsum", **options)
