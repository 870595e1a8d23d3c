"""A server's own lines saying an IXFR became an AXFR, in kinds a reader can count: each
dialect maps its own words (servers/<kind>.py `fallback_wording`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal, get_args

from harness.core.terms import ServerKind


def zone_name(name: str) -> str:
    return name if name.endswith(".") else name + "."


# Why an IXFR became an AXFR, in kinds a reader can count; each dialect maps its own words.
FallbackKind = Literal[
    "journal trimmed",  # the primary's history no longer reaches the secondary's serial
    "delta too large",  # the IXFR would be larger than the primary lets it (max-ixfr-ratio)
    "history inconsistent",  # the history does not apply to the secondary's copy
    "IXFR refused",  # the primary answered the IXFR request with an error
    "falling back to AXFR",  # a full zone in answer to an IXFR, no reason given
]
FALLBACK_KINDS: tuple[FallbackKind, ...] = get_args(FallbackKind)


@dataclass(frozen=True)
class Fallback:
    """A server's own line saying that an IXFR became an AXFR: on the primary's side
    ("out", it sent a full zone) or the secondary's ("in", it took one)."""

    server: ServerKind
    side: str  # out | in
    zone: str
    peer: str | None  # the other end, as the line writes it
    kind: FallbackKind
    text: str  # the line's message, as the server wrote it
    at_unix: float | None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class FallbackWording:
    """One line shape: its pattern (groups `zone`, `peer` where it names them, and
    `message`, the words kept), which side writes it, and its kind."""

    pattern: re.Pattern[str]
    side: str
    kind: FallbackKind


def fallbacks_in(
    text: str,
    server: ServerKind,
    wordings: tuple[FallbackWording, ...],
    timestamp: Callable[[str], float | None],
) -> list[Fallback]:
    """Every line of a server's log text saying an IXFR became an AXFR, in order (pure)."""
    out = []
    for line in text.splitlines():
        for wording in wordings:
            match = wording.pattern.search(line)
            if match is None:
                continue
            groups = match.groupdict()
            out.append(
                Fallback(
                    server,
                    wording.side,
                    zone_name(groups["zone"]),
                    groups.get("peer"),
                    wording.kind,
                    groups["message"],
                    timestamp(line),
                )
            )
            break
    return out
