"""Client side of zone transfers: SOA pollers, the harness's own AXFR/IXFR reader, a kdig
wrapper and the verification digest.

Protocol logic lives in pure functions (wire splitting, record walking, serial arithmetic,
kdig output parsing, digests); the I/O around them is thin, in the style of dnspython's
dns/xfr.py. Every module here reports a failed transfer as a ``PullResult`` with ``ok=False``
and an ``error`` that says what happened; only programming errors and bad arguments raise.

Record-count convention (``PullResult.records``): the number of resource records in the answer
sections of all response messages, exactly as the server sent them. An AXFR of a zone of N
records therefore counts N + 1 (the SOA opens and closes the transfer), which is also what
kdig prints as "records"; an IXFR counts every SOA that delimits its difference sequences.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from harness.core.errors import UserInputError, XfrbenchError

TSIG_ALGORITHMS = (
    "hmac-sha1",
    "hmac-sha224",
    "hmac-sha256",
    "hmac-sha384",
    "hmac-sha512",
)
XfrKind = Literal["axfr", "ixfr"]
IxfrStyle = Literal["incremental", "axfr-style", "up-to-date"]


class XfrError(XfrbenchError):
    """A transfer-level failure raised by the pollers (the pullers return ok=False instead)."""


class XfrTimeout(XfrError):
    """A deadline passed; the message says how long was waited, for what and from where."""


@dataclass(frozen=True)
class TsigKey:
    """A TSIG key: name, algorithm (``hmac-sha256`` style) and base64 secret.

    The secret never appears in ``repr`` (so never in logs or tracebacks); render it into
    files of mode 0600 only (see ``kdig_keyfile_text`` and the server adapters).
    """

    name: str
    algorithm: str
    secret: str = field(repr=False)

    def __post_init__(self) -> None:
        if self.algorithm not in TSIG_ALGORITHMS:
            raise UserInputError(
                f"unknown TSIG algorithm {self.algorithm!r}",
                key="tsig.algorithm",
                fix=f"use one of {', '.join(TSIG_ALGORITHMS)}",
            )
        try:
            raw = base64.b64decode(self.secret, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise UserInputError(
                f"TSIG secret of key {self.name!r} is not valid base64",
                key="tsig.secret",
                fix="generate one with `tsig-keygen` or `openssl rand -base64 32`",
            ) from exc
        if not raw:
            raise UserInputError(f"TSIG secret of key {self.name!r} is empty", key="tsig.secret")

    def to_dnspython(self) -> Any:
        """The key as a ``dns.tsig.Key``."""
        import dns.tsig

        return dns.tsig.Key(self.name, self.secret, self.algorithm)

    def kdig_keyfile_text(self) -> str:
        """The ``algorithm:name:secret`` line kdig's ``-k`` option reads."""
        return f"{self.algorithm}:{self.name}:{self.secret}\n"


@dataclass
class PullResult:
    """One client-side transfer, as measured by the puller.

    Times are seconds measured with ``time.monotonic()`` relative to the start of
    ``connect()`` (own reader) and so never negative; ``started_at`` is the wall-clock
    (unix) time of that start. ``bytes`` counts DNS messages including their 2-byte TCP
    length prefixes. ``records``: see the module docstring. ``digest`` is set when requested
    and when the response is a full zone (AXFR or AXFR-style IXFR): the RFC 8976
    SIMPLE/SHA-384 digest as 96 hex digits (``pull(digest=True)``, ``pull_verified_copy``),
    or the streaming RRSUM as ``rrsum:<records>:<hex>`` (``verify.verify_copy``; see
    ``harness.xfr.rrsum``). Only digests of the same kind compare.
    """

    ok: bool
    xfr: XfrKind
    zone: str
    error: str | None = None
    serial: int | None = None
    records: int = 0
    bytes: int = 0
    messages: int = 0
    duration_s: float | None = None
    connect_s: float | None = None
    tls_s: float | None = None
    first_byte_s: float | None = None
    started_at: float | None = None
    digest: str | None = None
    ixfr_style: IxfrStyle | None = None
    method: str = "client-pull-own"
    extra: dict[str, Any] = field(default_factory=dict)
    # Raw response messages, kept only with keep_records=True (see pull.iter_rrsets).
    wire: list[bytes] | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (without the raw messages)."""
        data = asdict(self)
        data.pop("wire")
        return data


def compare_zones(primary: PullResult, secondary: PullResult) -> str | None:
    """None when both pulls carry the same zone, else the first reason they differ.

    Both must be successful full-zone pulls with a digest: the digest is the only check
    that sees record contents; serials and counts explain a difference.
    """
    for label, result in (("primary", primary), ("secondary", secondary)):
        if not result.ok:
            return f"{label} pull failed: {result.error}"
    if primary.serial != secondary.serial:
        return f"serial differs: primary {primary.serial}, secondary {secondary.serial}"
    counts = f"records: primary {primary.records}, secondary {secondary.records}"
    if primary.digest is None or secondary.digest is None:
        if primary.records != secondary.records:
            return f"record counts differ ({counts})"
        missing = "primary" if primary.digest is None else "secondary"
        return f"no digest for the {missing} copy; pull with digest=True to verify"
    if primary.digest.startswith("rrsum:") != secondary.digest.startswith("rrsum:"):
        return (
            "the digests are of different kinds (RRSUM and RFC 8976); compute both copies' "
            "with the same function (verify_copy, or pull_verified_copy)"
        )
    if primary.digest != secondary.digest:
        return (
            f"digest differs: primary {primary.digest[:16]}…, "
            f"secondary {secondary.digest[:16]}… ({counts})"
        )
    # Equal digests decide even if the counts differ (a server may repeat a record).
    return None
