"""`xfrbench zones generate|changes|digest`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.core.errors import UserInputError
from harness.xfr.digest import zone_digest
from harness.zonegen.changes import change_set
from harness.zonegen.generate import generate
from harness.zonegen.model import HOSTING_NATURAL_RECORDS, TINY_RECORDS, ZoneSpec, validate


def _add_spec_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", required=True, help="tiny | tld | hosting")
    p.add_argument(
        "--records",
        default=None,
        help=f"records per zone incl. SOA and apex NS (tiny: {TINY_RECORDS}; "
        f"hosting default {HOSTING_NATURAL_RECORDS}; required for tld)",
    )
    p.add_argument("--origin", required=True, help="zone name, or the parent of hosting zones")
    p.add_argument("--seed", default=1)
    p.add_argument("--zones", default=1, help="hosting: number of zones")
    p.add_argument("--signed", action="store_true", help="DNSSEC-sign with dnssec-signzone")
    p.add_argument("--serial", default=1, help="base SOA serial")
    p.add_argument("--cache-dir", type=Path, default=None)


def register(subparsers: Any) -> None:
    zones = subparsers.add_parser("zones", help="generate zone files, change sets, digests")
    sub = zones.add_subparsers(dest="zones_command", required=True)

    gen = sub.add_parser("generate", help="write a preset zone (cached)")
    _add_spec_flags(gen)
    gen.add_argument(
        "--output",
        type=Path,
        default=None,
        help="file (tiny, tld) or folder (hosting) to place the result at",
    )
    gen.set_defaults(func=cmd_generate)

    changes = sub.add_parser("changes", help="the zone at --serial-to and its IXFR diff")
    _add_spec_flags(changes)
    changes.add_argument("--serial-to", required=True)
    changes.add_argument(
        "--changes", required=True, help="records changed per change set (half deleted, half added)"
    )
    changes.set_defaults(func=cmd_changes)

    dig = sub.add_parser("digest", help="RFC 8976 ZONEMD SHA-384 SIMPLE digest of a zone file")
    dig.add_argument("path", type=Path)
    dig.add_argument("--origin", required=True)
    dig.set_defaults(func=cmd_digest)


def _int(value: Any, flag: str) -> int:
    """Parse an integer flag ourselves, so a bad value is a UserInputError naming the flag."""
    if isinstance(value, int):
        return value
    try:
        return int(str(value).replace("_", ""))
    except ValueError:
        raise UserInputError(
            f"{value!r} is not an integer", key=flag, fix=f"give a whole number, e.g. {flag} 1000"
        ) from None


def spec_from_args(args: argparse.Namespace) -> ZoneSpec:
    records = None if args.records is None else _int(args.records, "--records")
    if records is None:
        if args.preset == "tld":
            raise UserInputError(
                "the tld preset needs a size", key="--records", fix="e.g. --records 1000000"
            )
        records = TINY_RECORDS if args.preset == "tiny" else HOSTING_NATURAL_RECORDS
    spec = ZoneSpec(
        preset=args.preset,
        records=records,
        origin=args.origin,
        seed=_int(args.seed, "--seed"),
        zones=_int(args.zones, "--zones"),
        signed=args.signed,
        serial=_int(args.serial, "--serial"),
    )
    return validate(spec, flags=True)


def cmd_generate(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    result = generate(spec, output=args.output, cache_dir=args.cache_dir)
    records = sum(f.records for f in result.files)
    size = sum(f.bytes for f in result.files)
    table = Table(title=f"zones generate: {spec.preset} {spec.origin}")
    table.add_column("what")
    table.add_column("value", overflow="fold")
    shown = result.files[:5]
    for f in shown:
        table.add_row("file", f"{f.path} ({f.origin}, {f.records:,} records, {f.bytes:,} bytes)")
    if len(result.files) > len(shown):
        table.add_row("file", f"... and {len(result.files) - len(shown):,} more")
    if result.index is not None:
        table.add_row("index", str(result.index))
    table.add_row("zones", f"{len(result.files):,}")
    table.add_row("records", f"{records:,}")
    table.add_row("bytes", f"{size:,}")
    table.add_row("seconds", f"{result.seconds:.3f}")
    rate = records / result.seconds if result.seconds > 0 else 0.0
    table.add_row("records/s", f"{rate:,.0f}" + (" (cache hit)" if result.cached else ""))
    table.add_row("cached", "yes" if result.cached else "no")
    Console().print(table)
    return 0


def cmd_changes(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    cs = change_set(
        spec,
        _int(args.serial_to, "--serial-to"),
        _int(args.changes, "--changes"),
        cache_dir=args.cache_dir,
    )
    table = Table(title=f"zones changes: {cs.origin} {cs.serial_from} -> {cs.serial_to}")
    table.add_column("what")
    table.add_column("value", overflow="fold")
    table.add_row("zone", str(cs.zone_path))
    table.add_row("diff", str(cs.diff_path))
    table.add_row("deleted", f"{cs.deleted:,}")
    table.add_row("added", f"{cs.added:,}")
    Console().print(table)
    return 0


def cmd_digest(args: argparse.Namespace) -> int:
    if not args.path.is_file():
        raise UserInputError(f"{args.path} is not a file", key="PATH", fix="give a zone file")
    import dns.exception

    try:
        digest = zone_digest(args.path, args.origin)
    except dns.exception.DNSException as exc:
        raise UserInputError(
            f"cannot parse the zone: {exc}", file=args.path, fix="check --origin and the file"
        ) from exc
    print(f"{digest}  {args.path}  (ZONEMD SHA-384 SIMPLE, origin {args.origin})")
    return 0
