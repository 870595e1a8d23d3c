"""The zone generator's public data types and input validation."""

from __future__ import annotations

import copy
import dataclasses
import re
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

from harness.core.errors import UserInputError

# Bump whenever the bytes a spec produces change: it is part of every cache key.
GENERATOR_VERSION = 2

PRESETS = ("tiny", "tld", "hosting", "file")
TINY_RECORDS = 2
HOSTING_NATURAL_RECORDS = 12
HOSTING_MIN_RECORDS = 3  # SOA + 2 NS
TLD_MIN_RECORDS = 13  # SOA + 4 apex NS + their A/AAAA
MAX_RECORDS = 200_000_000
MAX_HOSTING_RECORDS = 100_000
MAX_ZONES = 1_000_000
MAX_SERIAL = 2**32 - 1

# Names end up in file names and cache keys: plain hostname-ish labels only.
_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")


@dataclass(frozen=True)
class ZoneSpec:
    preset: Literal["tiny", "tld", "hosting", "file"]
    records: int  # incl. SOA and apex NS (tiny: always 2); hosting: records per zone
    origin: str  # e.g. "cz."; for hosting the parent under which zones are named
    seed: int = 1
    zones: int = 1  # hosting only
    signed: bool = False  # DNSSEC-signed variant; `records` counts the unsigned input
    serial: int = 1  # base serial
    # preset "file": an operator's zone file (absolute path) and its later versions, in
    # order (harness/zonegen/ownzone.py); `records` and `serial` are the file's.
    file: str | None = None
    versions: tuple[str, ...] = ()


@dataclass(frozen=True)
class ZoneFile:
    origin: str
    path: Path
    serial: int
    records: int  # records in the file as written (signed: incl. DNSSEC records)
    bytes: int


class ZoneFiles(Sequence[ZoneFile]):
    """Many zone files of one folder held as columns, each ZoneFile (and its Path) made
    when asked for: 100 k hosting zones as a tuple of ZoneFiles held some 35 MB of the
    driver, their Paths most of it (tracemalloc). Reads as a tuple does: len, index,
    slices (tuples), iteration, equality with a sequence of the same files. `head`: files
    of other folders before them (a catalog before its members)."""

    __slots__ = ("_folder", "_head", "_names", "_origins", "_records", "_serials", "_sizes")

    def __init__(self, folder: Path, items: Sequence[dict[str, Any]],
                 head: tuple[ZoneFile, ...] = ()) -> None:  # fmt: skip
        self._folder = folder
        self._origins = [str(item["origin"]) for item in items]
        # A name is kept only when it is not the usual "<origin>zone" (None).
        names = [None if item["file"] == f"{item['origin']}zone" else str(item["file"])
                 for item in items]  # fmt: skip
        self._names: list[str | None] | None = names if any(names) else None
        self._serials = array("q", (int(item["serial"]) for item in items))
        self._records = array("q", (int(item["records"]) for item in items))
        self._sizes = array("q", (int(item["bytes"]) for item in items))
        self._head = head

    def with_first(self, file: ZoneFile) -> ZoneFiles:
        """These files with `file` before them."""
        out = copy.copy(self)
        out._head = (file, *self._head)
        return out

    def __len__(self) -> int:
        return len(self._head) + len(self._origins)

    def _at(self, index: int) -> ZoneFile:
        if index < len(self._head):
            return self._head[index]
        i = index - len(self._head)
        origin = self._origins[i]
        name = self._names[i] if self._names is not None else None
        path = self._folder / (name or f"{origin}zone")
        return ZoneFile(origin, path, self._serials[i], self._records[i], self._sizes[i])

    @overload
    def __getitem__(self, index: int) -> ZoneFile: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[ZoneFile, ...]: ...

    def __getitem__(self, index: int | slice) -> ZoneFile | tuple[ZoneFile, ...]:
        if isinstance(index, slice):
            return tuple(self._at(i) for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("zone file index out of range")
        return self._at(index)

    def __iter__(self) -> Iterator[ZoneFile]:
        for i in range(len(self)):
            yield self._at(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ZoneFiles({len(self)} files in {self._folder})"


@dataclass(frozen=True)
class GeneratedZones:
    spec: ZoneSpec
    files: Sequence[ZoneFile]  # a tuple, or a hosting pool's ZoneFiles
    index: Path | None  # hosting: "origin<TAB>file" per zone; zones.json beside it
    seconds: float  # wall time of this call (a cache hit is fast)
    cached: bool


@dataclass(frozen=True)
class ChangeSet:
    origin: str
    serial_from: int
    serial_to: int
    zone_path: Path | None  # the full zone at serial_to (None: a diff-only change set)
    diff_path: Path  # RFC 1995-style text: old SOA, deletions, new SOA, additions
    added: int
    deleted: int
    changed_bytes: int | None = None  # the changed records' text (own zones' versions)
    version: str | None = None  # the version file it publishes (own zones)


def _key(name: str, flags: bool) -> str:
    return f"--{name.replace('_', '-')}" if flags else name


def normalize_origin(origin: str, *, key: str = "origin") -> str:
    text = origin.strip().lower()
    if not text.endswith("."):
        text += "."
    labels = text[:-1].split(".") if text != "." else []
    if not labels:
        raise UserInputError(
            "the root zone is not supported as an origin",
            key=key,
            fix="give a name such as cz. or hosting.example.",
        )
    bad = [label for label in labels if not _LABEL.match(label)]
    if bad or len(text) > 200:
        raise UserInputError(
            f"origin {origin!r} is not a plain domain name",
            key=key,
            fix="use letters, digits, '-' and '_' only, labels of 1-63 characters, e.g. cz.",
        )
    return text


def validate(spec: ZoneSpec, *, flags: bool = False) -> ZoneSpec:
    """Check a spec and return it normalized (origin lower-case with the final dot).

    With ``flags`` the errors name command-line flags (--records) instead of fields.
    """
    k = lambda name: _key(name, flags)  # noqa: E731
    if spec.preset not in PRESETS:
        raise UserInputError(
            f"unknown preset {spec.preset!r}",
            key=k("preset"),
            fix=f"use one of {', '.join(PRESETS)}",
        )
    origin = normalize_origin(spec.origin, key=k("origin"))
    if spec.preset == "file":
        if spec.file is None:
            raise UserInputError("the file preset needs a zone file", key=k("file"))
        return dataclasses.replace(spec, origin=origin)
    for name in ("records", "seed", "zones", "serial"):
        value = getattr(spec, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise UserInputError(f"{name} must be an integer, not {value!r}", key=k(name))
    if spec.seed < 0:
        raise UserInputError("the seed must not be negative", key=k("seed"), fix="use 0 or more")
    if not 0 <= spec.serial <= MAX_SERIAL:
        raise UserInputError(
            f"serial {spec.serial} is outside 0..{MAX_SERIAL}",
            key=k("serial"),
            fix="use a 32-bit serial",
        )
    if spec.preset != "hosting" and spec.zones != 1:
        raise UserInputError(
            f"the {spec.preset} preset makes one zone, not {spec.zones}",
            key=k("zones"),
            fix="drop --zones, or use --preset hosting",
        )
    if spec.preset == "tiny" and spec.records != TINY_RECORDS:
        raise UserInputError(
            f"the tiny preset always has {TINY_RECORDS} records (SOA + NS), not {spec.records}",
            key=k("records"),
            fix=f"use --records {TINY_RECORDS} or --preset tld",
        )
    if spec.preset == "tld" and not TLD_MIN_RECORDS <= spec.records <= MAX_RECORDS:
        raise UserInputError(
            f"the tld preset needs {TLD_MIN_RECORDS}..{MAX_RECORDS} records, not {spec.records}",
            key=k("records"),
            fix=f"use at least {TLD_MIN_RECORDS} (SOA, 4 apex NS and their glue) or --preset tiny",
        )
    if spec.preset == "hosting":
        if not HOSTING_MIN_RECORDS <= spec.records <= MAX_HOSTING_RECORDS:
            raise UserInputError(
                f"hosting zones need {HOSTING_MIN_RECORDS}..{MAX_HOSTING_RECORDS} records each, "
                f"not {spec.records}",
                key=k("records"),
                fix=f"use {HOSTING_NATURAL_RECORDS} for the natural hosting mix",
            )
        if not 1 <= spec.zones <= MAX_ZONES:
            raise UserInputError(
                f"zones must be 1..{MAX_ZONES}, not {spec.zones}",
                key=k("zones"),
                fix="e.g. --zones 1000",
            )
    return dataclasses.replace(spec, origin=origin)
