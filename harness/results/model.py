"""The versioned result model: one ``TransferRecord`` per transfer attempt.

Field names are a contract with other tools (docs/architecture.md, "Results format"); new
fields are added with defaults, and ``FORMAT_VERSION`` (one number for records, run.json,
case.json and summary.json) bumps when a meaning changes. Older records are read through
``upgrade_record``, so every run folder written before still loads. Times are seconds;
``duration_s`` is what the ``method`` measures:
- ``server-to-server``: trigger (NOTIFY sent / retransfer command) to the secondary's first
  answer with the new serial;
- ``client-pull-own`` / ``client-pull-kdig``: connect() (own reader) or query sent (kdig) to
  the last message.
``duration_error_s`` says how far the end of that duration may lie after the instant it
names: from sending the last SOA query the secondary answered without the new serial (or
from the trigger) to the first answer with it; for a cold start that of the last zone.
Client pulls and records written before leave it None.
``phases`` are seconds since the trigger (or since connect() for pulls); ``bound`` holds the
model bounds the figure should be read against (bit/s); ``server_logged`` the server's own
figures. A record whose ``ok`` is false, or whose ``verified`` is false, never counts in a
summary figure; ``failure`` names which of ``FAILURES`` kept it out. One kind is not a
failure: a record that is ok, not verified, with no failure and the reason its copy was
not checked in ``extra["unchecked"]`` (a change stream's serials before its last: a
secondary serves each only until the next arrives, and only its final copy is checked).
It is ``unchecked``: in no failure count and in no verified one; the stream's latency
figures take it (they are about serving a serial), saying so.

Versions: 1, the first harness (kinds in ``primary``/``secondary``, a fleet's host and site
in ``extra``); 2, ``primary_kind``/``secondary_kind``, ``host``, ``site``, ``failure``,
``duration_error_s``, and run.json's ``meta_version`` folded into ``format_version``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from harness.core.errors import XfrbenchError
from harness.core.terms import METHODS, TRANSPORTS, XFR_KINDS, Method, TransportName, XfrKind

FORMAT_VERSION = 2

# Why an attempt does not count, coarsest first: the pair cannot do it; the harness could not
# put the new version on the primary (or found the primary serving something else); a
# server exited or never started; the secondary never served the new serial in time; its
# copy differs from the primary's; the harness itself failed (a transport switch it could
# not prove, a copy it could not read).
Failure = Literal["unsupported", "publish", "server", "timeout", "verification", "harness"]
FAILURES: tuple[Failure, ...] = (
    "unsupported",
    "publish",
    "server",
    "timeout",
    "verification",
    "harness",
)
# In the words of a failure's reason, as the first screen groups them.
FAILURE_WORDS: dict[Failure, str] = {
    "unsupported": "unsupported by the servers",
    "publish": "publish error (the harness's, not the transfer's)",
    "server": "a server failed",
    "timeout": "timed out",
    "verification": "copy differs from the primary",
    "harness": "harness error",
}

# extra's key of an unchecked record: why its copy was not checked.
UNCHECKED = "unchecked"


class ResultFormatError(XfrbenchError):
    """A result record or file that does not follow the format."""


@dataclass
class TransferRecord:
    run_id: str
    case: str
    repeat: int
    primary_kind: str  # the primary's server kind (bind, knot, ...)
    secondary_kind: str  # the secondary's
    host: str  # the secondary's host ("secondary" in a case of one; a fleet's "seoul-2")
    site: str | None  # the secondary's site in a fleet; None for a case of one
    transport: TransportName  # the case's Transport by its name (harness/core/transport.py)
    xfr: XfrKind
    zone: str
    serial: int | None
    records: int | None
    bytes: int | None
    messages: int | None
    duration_s: float | None
    started_at: float  # unix time of the trigger / connect
    ok: bool
    error: str | None = None
    verified: bool = False
    trigger: str | None = None  # notify | retransfer | cold-start | pull
    method: Method = "server-to-server"
    phases: dict[str, float] = field(default_factory=dict)
    server_logged: dict[str, Any] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    unsupported: bool = False  # the reason is in ``error``
    failure: Failure | None = None  # None when the attempt counts
    duration_error_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.failure is None and not self.counts and not self.unchecked:
            # A writer that did not name the failure (version 1): from its words.
            self.failure = classify_failure(
                self.error, ok=self.ok, verified=self.verified, unsupported=self.unsupported
            )
        self.validate()

    def validate(self) -> None:
        """Raise ``ResultFormatError`` for a value no measurement can produce."""
        if self.transport not in TRANSPORTS:
            raise ResultFormatError(f"transport {self.transport!r} not in {TRANSPORTS}")
        if self.xfr not in XFR_KINDS:
            raise ResultFormatError(f"xfr {self.xfr!r} not in {XFR_KINDS}")
        if self.method not in METHODS:
            raise ResultFormatError(f"method {self.method!r} not in {METHODS}")
        if self.repeat < 0:
            raise ResultFormatError(f"repeat {self.repeat} is negative")
        _non_negative("duration_s", self.duration_s)
        for name in ("records", "bytes", "messages"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ResultFormatError(f"{name} {value} is negative")
        for phase, value in self.phases.items():
            _non_negative(f"phases.{phase}", value)
        if self.unsupported and self.ok:
            raise ResultFormatError("an unsupported transfer cannot be ok")
        if (self.unsupported or not self.ok) and not self.error:
            raise ResultFormatError("a failed or unsupported transfer needs its reason in error")
        _non_negative("duration_error_s", self.duration_error_s)
        if self.failure is not None and self.failure not in FAILURES:
            raise ResultFormatError(f"failure {self.failure!r} not in {FAILURES}")
        if self.unsupported and self.failure != "unsupported":
            raise ResultFormatError("an unsupported transfer has failure 'unsupported'")
        if self.counts and self.failure is not None:
            raise ResultFormatError(f"a transfer that counts has no failure ({self.failure})")

    @property
    def unchecked(self) -> bool:
        """Served and measured, but its copy was not checked (``extra["unchecked"]`` says
        why): neither verified nor a failure."""
        return (
            self.ok
            and not self.verified
            and not self.unsupported
            and self.failure is None
            and self.duration_s is not None
            and bool(self.extra.get(UNCHECKED))
        )

    @property
    def counts(self) -> bool:
        """Whether this attempt may enter a summary figure."""
        return self.ok and self.verified and not self.unsupported and self.duration_s is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        """One line of JSON (no newline inside), keys in field order."""
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TransferRecord:
        version = data.get("format_version", 1)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ResultFormatError(
                f"record has format_version {version!r}; this harness reads up to "
                f"{FORMAT_VERSION}: upgrade xfrbench"
            )
        if version < FORMAT_VERSION:
            data = upgrade_record(data)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ResultFormatError(f"unknown record fields: {', '.join(unknown)}")
        try:
            return cls(**data)
        except TypeError as exc:  # a missing required field
            raise ResultFormatError(f"bad record: {exc}") from None

    @classmethod
    def from_json(cls, line: str) -> TransferRecord:
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResultFormatError(f"not a JSON record: {exc}") from None
        if not isinstance(data, dict):
            raise ResultFormatError("a record must be a JSON object")
        return cls.from_dict(data)


def _non_negative(name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ResultFormatError(f"{name} must be a number of seconds, got {value!r}")
    if value < 0:
        raise ResultFormatError(
            f"{name} is {value} s: durations are never negative (a clock or ordering bug)"
        )
    if math.isinf(value):
        raise ResultFormatError(f"{name} is infinite")


def classify_failure(error: str | None, *, ok: bool, verified: bool, unsupported: bool) -> Failure:
    """The failure of a version-1 record, from the words its harness wrote (they are fixed:
    harness/measure/protocol.py and run/session.py of that version)."""
    text = (error or "").lower()
    if unsupported:
        return "unsupported"
    if (ok and not verified) or "rrsum differs" in text or "digest differs" in text:
        return "verification"
    if "the primary never served" in text or "refused the update" in text:
        return "publish"
    if "timeout after" in text or "timed out" in text:
        return "timeout"
    if "exited" in text or "did not start" in text or "failed to start" in text:
        return "server"
    if "could not read" in text:
        return "harness"
    return "verification" if text.startswith("rrsum") else "server"


def upgrade_record(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 record as version 2: the kinds under their own names, the fleet's host
    and site out of ``extra`` (a case of one had the host "secondary" and no site), and the
    failure named."""
    out = dict(data)
    extra = dict(out.get("extra") or {})
    out["primary_kind"] = out.pop("primary", None)
    out["secondary_kind"] = out.pop("secondary", None)
    out["host"] = str(extra.pop("host", None) or "secondary")
    site = extra.pop("site", None)
    out["site"] = str(site) if site else None
    out["extra"] = extra
    counts = (
        out.get("ok")
        and out.get("verified")
        and not out.get("unsupported")
        and out.get("duration_s") is not None
    )
    if not counts:
        out["failure"] = classify_failure(
            out.get("error"),
            ok=bool(out.get("ok")),
            verified=bool(out.get("verified")),
            unsupported=bool(out.get("unsupported")),
        )
    out["format_version"] = FORMAT_VERSION
    return out
