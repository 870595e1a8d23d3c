"""What a cold start reads, whichever backend ran it: how a secondary's zones were polled,
what its log says of its incoming transfers, and its copies checked against the sums of
the zone files. The netns backend (live.py) and the inventory one (remote/) read alike.
"""

from __future__ import annotations

from typing import Any

from harness import zonegen
from harness.measure.protocol import ColdStartLog, Verification
from harness.servers import Server, count_failures
from harness.xfr import PullResult
from harness.xfr.poll_zones import ZonesServed
from harness.xfr.rrsum import ZoneSum
from harness.xfr.verify import check_copy
from harness.xfr.zonefile_sum import zone_set_sums


def logged_sum(sizes: list[int | None]) -> int | None:
    """The sum of a size every logged transfer says; None when one of them does not say
    it (NSD 4.6 and PowerDNS log no sizes): a sum of some would pass for the whole."""
    if not sizes or any(size is None for size in sizes):
        return None
    return sum(size for size in sizes if size is not None)


def polling_summary(seen: ZonesServed) -> dict[str, Any]:
    """How a host's zones were polled: rounds, queries (and those asked again within a
    round), the slowest round, how many zones were served."""
    return {
        "rounds": seen.rounds,
        "queries": seen.queries,
        "resends": seen.resends,
        "round_max_s": max(seen.round_s, default=None),
        "zones_served": len(seen.served),
    }


def read_cold_start_log(dialect: type[Server], text: str, started: float | None) -> ColdStartLog:
    """The secondary's incoming transfers in its own wording; `started` (unix time, the
    clock of the host that wrote the log) is when it was started."""
    incoming = [e for e in dialect.parse_log(text) if e.direction == "in"]
    stamps = [e.at_unix for e in incoming if e.at_unix is not None]
    # A stamp starts an interval of its resolution (Knot: whole seconds): never before 0.
    last = max(0.0, max(stamps) - started) if stamps and started else None
    return ColdStartLog(
        transfers=len(incoming),
        bytes=logged_sum([e.bytes for e in incoming]),
        messages=logged_sum([e.messages for e in incoming]),
        failures=count_failures(dialect.kind, text, started).to_json(),
        last_transfer_s=None if last is None else round(last, 3),
        stamp_resolution_s=dialect.failures.resolution_s,
    )


def add_references(
    references: dict[str, ZoneSum], generated: zonegen.GeneratedZones, zones: list[str]
) -> None:
    """The sums of the zone files into `references`, unless every one of `zones` is there
    (kept beside the generated set: a hosting set's are summed once)."""
    if all(zone in references for zone in zones):
        return
    index = generated.index
    cache = index.with_name("rrsums.json") if index is not None else None
    files = [(f.path, f.origin) for f in generated.files]
    references.update(zone_set_sums(files, cache_file=cache))


def check_copies(
    references: dict[str, ZoneSum], copies: dict[str, PullResult], zones: list[str], serial: int
) -> dict[str, Verification]:
    """Each zone's copy against its zone file's sum at `serial` (pure)."""
    out = {}
    for zone in zones:
        copy = copies[zone]
        if zone not in references:
            out[zone] = Verification(False, "could not read the primary's copy", None)
        elif not copy.ok:
            out[zone] = Verification(False, f"could not read the copy: {copy.error}", None)
        else:
            problem = check_copy(references[zone], copy, serial)
            out[zone] = Verification(problem is None, problem, copy.records)
    return out
