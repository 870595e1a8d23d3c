"""A client's pull of a zone from the primary across a secondary's link: the own reader or
kdig, over the selected case's transport, its digest checked against the primary's."""

from __future__ import annotations

from harness.measure.protocol import Pulled
from harness.xfr import PullResult
from harness.xfr.client import TLS_HOSTNAME, pull_zone
from harness.xfr.rrsum import ZoneSum
from harness.xfr.verify import check_copy


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


__all__ = ["TLS_HOSTNAME", "Pulled", "pull_zone", "pulled"]
