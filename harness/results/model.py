"""The versioned result model: one ``TransferRecord`` per transfer attempt.

Field names listed in DESIGN.md ("Results format") are a contract with other tools; new
fields are added with defaults and ``FORMAT_VERSION`` bumps when a meaning changes. Times are
seconds; ``duration_s`` is what the ``method`` measures:
- ``server-to-server``: trigger (NOTIFY sent / retransfer command) to the secondary's first
  answer with the new serial;
- ``client-pull-own`` / ``client-pull-kdig``: connect() (own reader) or query sent (kdig) to
  the last message.
``phases`` are seconds since the trigger (or since connect() for pulls); ``bound`` holds the
model bounds the figure should be read against (bit/s); ``server_logged`` the server's own
figures. A record whose ``ok`` is false, or whose ``verified`` is false, never counts in a
summary figure.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from harness.core.errors import XfrbenchError
from harness.core.terms import METHODS, TRANSPORTS, XFR_KINDS, Method, Transport, XfrKind

FORMAT_VERSION = 1


class ResultFormatError(XfrbenchError):
    """A result record or file that does not follow the format."""


@dataclass
class TransferRecord:
    run_id: str
    case: str
    repeat: int
    primary: str
    secondary: str
    transport: Transport
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
    extra: dict[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
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
        version = data.get("format_version", FORMAT_VERSION)
        if version > FORMAT_VERSION:
            raise ResultFormatError(
                f"record has format_version {version}; this harness reads up to "
                f"{FORMAT_VERSION}: upgrade xfrbench"
            )
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
