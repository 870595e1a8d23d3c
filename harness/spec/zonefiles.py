"""`[zones] file` and `[zones] versions`: an operator's own zone and its change history,
read when the scenario is loaded, so that a file that does not parse is refused before any
server starts (exit 2, naming the file and line).

Paths are relative to the scenario file. The zone's origin is its SOA's owner (or
`origin`, which the SOA must own); `records` and `serial` are the file's. Each file is read
once into the zone cache (harness/zonegen/ownzone.py, keyed by its content), each record's
data parsed by the compiled RRSUM (the reference sum's own parser), and the versions'
serials must increase.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from harness.core.errors import ScenarioError, UserInputError
from harness.spec.scenario import flatten_matrix
from harness.xfr.rrsum_native import sum_text
from harness.zonegen import ownzone

KEYS = ("file", "versions")


def _absolute(base: Path, given: str) -> Path:
    path = Path(given).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


def version_paths(zones: dict[str, Any], base: Path, scenario: Path) -> list[Path]:
    """The versions the scenario lists (a folder: its files in name order), absolute."""
    given = zones.get("versions")
    if given is None:
        return []
    if isinstance(given, str):
        folder = _absolute(base, given)
        if not folder.is_dir():
            raise ScenarioError(
                f"zones.versions: {given!r} is not a folder",
                fix="give a folder of zone files, or a list of files in order",
            )
        paths = ownzone.version_files(folder)
    else:
        paths = [_absolute(base, p) for p in given]
    if len(paths) < 2:
        raise UserInputError(
            f"a change history needs at least two versions, {len(paths)} given",
            file=scenario,
            key="zones.versions",
            fix="list the zone's versions in order, or use file = ... alone",
        )
    return paths


DNSSEC_TYPES = frozenset({"RRSIG", "NSEC", "NSEC3", "NSEC3PARAM", "DNSKEY"})


def resolve(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """The scenario with its own zone read: paths absolute, and the zone's origin, record
    count and serial filled in (the scenario as written is left as it is)."""
    zones = raw.get("zones")
    for key, values in flatten_matrix(raw.get("matrix", {})):
        tables = [v for v in values if isinstance(v, dict)] if isinstance(values, list) else []
        if key in [f"zones.{k}" for k in KEYS] or (
            key == "zones" and any(k in t for t in tables for k in KEYS)
        ):
            raise ScenarioError(
                f"{path}: matrix.{key}: your own zone cannot vary in the matrix",
                fix="run one scenario per zone file",
            )
    if not isinstance(zones, dict) or not any(zones.get(k) for k in KEYS):
        return raw
    base = path.resolve().parent
    out = copy.deepcopy(raw)
    zones = out["zones"]
    versions = version_paths(zones, base, path)
    first = _absolute(base, zones["file"]) if zones.get("file") else versions[0]
    if versions and first != versions[0]:
        raise ScenarioError(
            f"{path}: zones.file: {zones['file']!r} is not the first version ({versions[0].name})",
            fix="leave file out (the first version is loaded), or name the first version",
        )
    origin = zones.get("origin")
    origin = None if origin is None else origin.lower().rstrip(".") + "."
    zone_check = _checker(origin)
    chain = ownzone.load_versions(versions or [first], origin, check=zone_check)
    zones["file"] = str(first)
    if versions:
        zones["versions"] = [str(p) for p in versions]
    zones["origin"] = chain[0].origin
    zones["records"] = chain[0].records
    zones["serial"] = chain[0].serial
    # It carries its own DNSSEC records: a primary may have to take its versions as files.
    zones["signed"] = any(t in DNSSEC_TYPES for version in chain for t in version.types)
    return out


class _checker:
    """Each batch of records parsed by the compiled RRSUM (raises ValueError on a record
    it cannot read); the origin is the zone's, known once its SOA was read."""

    def __init__(self, origin: str | None) -> None:
        self.origin = origin

    def __call__(self, data: bytes) -> object:
        # Lines are absolute: any origin reads them the same; "." when not yet known.
        return sum_text(data, self.origin or ".")
