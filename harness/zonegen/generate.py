"""generate(): write a preset's zone file(s) into the cache, reuse them, place copies."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from harness.core.errors import UserInputError
from harness.zonegen import cache, ownzone, sign, small, tld
from harness.zonegen.model import (
    GENERATOR_VERSION,
    GeneratedZones,
    ZoneFile,
    ZoneFiles,
    ZoneSpec,
    validate,
)

INDEX = "zones.index"
INDEX_JSON = "zones.json"
WRITE_BUFFER = 1 << 20


def cache_key(spec: ZoneSpec) -> str:
    """Readable and complete: every field that changes the bytes is in the name."""
    origin = spec.origin.rstrip(".")
    signed = "signed" if spec.signed else "unsigned"
    return (
        f"{spec.preset}-{origin}-r{spec.records}-z{spec.zones}-seed{spec.seed}-{signed}"
        f"-serial{spec.serial}-v{GENERATOR_VERSION}"
    )


def zone_file_name(origin: str) -> str:
    return f"{origin}zone"  # "cz." -> "cz.zone"


def write_lines_file(path: Path, chunks: Any) -> int:
    """Write text chunks; return bytes written (the text is ASCII, so chars == bytes)."""
    size = 0
    # utf-8, not ascii: CPython has a faster encode path for it, and ASCII text is valid utf-8.
    with open(path, "w", encoding="utf-8", newline="\n", buffering=WRITE_BUFFER) as f:
        for chunk in chunks:
            f.write(chunk)
            size += len(chunk)
    return size


def _write_unsigned(spec: ZoneSpec, folder: Path) -> list[dict[str, Any]]:
    """Write the zone file(s) of an unsigned spec; return their metadata (cache-relative)."""
    if spec.preset == "tld":
        plan = tld.plan(spec.origin, spec.records, spec.seed)
        name = zone_file_name(spec.origin)
        size = write_lines_file(folder / name, tld.iter_chunks(plan, spec.serial))
        return [_meta_item(spec.origin, name, spec.serial, spec.records, size)]
    if spec.preset == "tiny":
        name = zone_file_name(spec.origin)
        size = write_lines_file(
            folder / name, small.tiny_lines(spec.origin, spec.serial, spec.seed)
        )
        return [_meta_item(spec.origin, name, spec.serial, 2, size)]
    items = []
    for i in range(spec.zones):
        lines = small.hosting_lines(spec.origin, spec.seed, i, spec.records, spec.serial)
        origin = small.hosting_zone_name(spec.origin, spec.seed, i)
        name = zone_file_name(origin)
        text = "".join(lines)
        with open(folder / name, "w", encoding="ascii", newline="\n") as f:
            f.write(text)
        items.append(_meta_item(origin, name, spec.serial, len(lines), len(text)))
    return items


def _meta_item(origin: str, file: str, serial: int, records: int, size: int) -> dict[str, Any]:
    return {"origin": origin, "file": file, "serial": serial, "records": records, "bytes": size}


def _sign_all(spec: ZoneSpec, folder: Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        zone = folder / item["file"]
        unsigned = zone.with_name(zone.name + ".unsigned")
        os.rename(zone, unsigned)
        keys = folder / "keys" / item["origin"].rstrip(".")
        keys.parent.mkdir(mode=0o700, exist_ok=True)
        sign.sign_zone(unsigned, zone, item["origin"], keys, opt_out=spec.preset == "tld")
        unsigned.unlink()  # the unsigned input is reproducible from the spec
        out.append({**item, "records": sign.count_records(zone), "bytes": zone.stat().st_size})
    return out


def _write_index(folder: Path, spec: ZoneSpec, items: list[dict[str, Any]]) -> None:
    with open(folder / INDEX, "w", encoding="ascii") as f:
        f.writelines(f"{item['origin']}\t{item['file']}\n" for item in items)
    doc = {"parent": spec.origin, "index": INDEX, "zones": items}
    (folder / INDEX_JSON).write_text(json.dumps(doc, indent=1) + "\n")


def build_entry(spec: ZoneSpec, folder: Path) -> dict[str, Any]:
    """Write everything for ``spec`` into ``folder`` (a fresh temp folder); return meta."""
    started = time.perf_counter()
    items = _write_unsigned(spec, folder)
    if spec.signed:
        items = _sign_all(spec, folder, items)
    if spec.preset == "hosting":
        _write_index(folder, spec, items)
    meta = {
        "spec": dataclasses.asdict(spec),
        "generator_version": GENERATOR_VERSION,
        "created": time.time(),
        "seconds": time.perf_counter() - started,
        "files": items,
        "index": INDEX if spec.preset == "hosting" else None,
    }
    cache.write_meta(folder, meta)
    return meta


def _usable(meta: dict[str, Any] | None, spec: ZoneSpec) -> bool:
    if meta is None:
        return False
    return not (spec.signed and time.time() - meta.get("created", 0) > sign.SIGNED_MAX_AGE_S)


def ensure_entry(spec: ZoneSpec, cache_dir: Path | None) -> tuple[Path, dict[str, Any], bool]:
    """The cache folder for a validated spec, built if missing; (folder, meta, was_cached)."""
    root = cache.cache_root(cache_dir)
    cache.sweep_stale(root)
    key = cache_key(spec)
    entry = root / key
    meta = cache.read_meta(entry)
    if _usable(meta, spec):
        assert meta is not None
        return entry, meta, True
    if entry.exists():
        shutil.rmtree(entry)  # incomplete, tampered with, or signatures too old
    with cache.building(root, key) as tmp:
        meta = build_entry(spec, tmp)
    return entry, meta, False


def _place_hosting(entry: Path, meta: dict[str, Any], output: Path) -> Path:
    """Put the hosting folder at ``output`` (replacing an earlier generated one only)."""
    if output.exists() and not output.is_dir():
        raise UserInputError(
            f"{output} is a file, the hosting preset writes a folder",
            key="--output",
            fix="give a folder path (it is created)",
        )
    if output.is_dir() and any(output.iterdir()) and not (output / INDEX_JSON).exists():
        raise UserInputError(
            f"{output} is a non-empty folder that xfrbench did not generate",
            key="--output",
            fix="give a new or empty folder",
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.parent / f".{output.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name in [item["file"] for item in meta["files"]] + [INDEX, INDEX_JSON]:
        cache.link_or_copy(entry / name, tmp / name)
    if output.is_dir() and any(output.iterdir()):
        old = output.parent / f".{output.name}.old-{os.getpid()}"
        os.rename(output, old)
        os.rename(tmp, output)
        shutil.rmtree(old)
    else:
        os.replace(tmp, output)  # rename(2) may replace an empty folder
    return output


def generate(
    spec: ZoneSpec, output: Path | None = None, cache_dir: Path | None = None
) -> GeneratedZones:
    """Generate (or reuse from the cache) the zone(s) of ``spec``; see the package docstring."""
    started = time.perf_counter()
    spec = validate(spec)
    if spec.preset == "file":
        own = ownzone.chain(spec, cache_dir)[0]
        file = ZoneFile(own.origin, own.path, own.serial, own.records, own.bytes)
        return GeneratedZones(spec, (file,), None, time.perf_counter() - started, own.cached)
    entry, meta, cached = ensure_entry(spec, cache_dir)
    folder = entry
    index: Path | None = entry / INDEX if spec.preset == "hosting" else None
    if output is not None:
        output = Path(output)
        if spec.preset == "hosting":
            folder = _place_hosting(entry, meta, output)
            index = folder / INDEX
        else:
            item = meta["files"][0]
            target = output / item["file"] if output.is_dir() else output
            target.parent.mkdir(parents=True, exist_ok=True)
            cache.link_or_copy(entry / item["file"], target)
            files = (
                ZoneFile(item["origin"], target, item["serial"], item["records"], item["bytes"]),
            )
            return GeneratedZones(spec, files, None, time.perf_counter() - started, cached)
    # A hosting pool's files as columns (model.ZoneFiles: 100 k ZoneFiles held 35 MB).
    files = ZoneFiles(folder, meta["files"])
    return GeneratedZones(spec, files, index, time.perf_counter() - started, cached)
