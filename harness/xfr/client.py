"""A client's pull of a zone from a server (the own reader or kdig), from a network
namespace or this host: the place operation `pull_from` (place/), the client pulls of
measure/client_pull.py and the agent's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.transport import Transport
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
