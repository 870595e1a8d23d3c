"""The one loop the figure modules share (pure): records (or samples) grouped by a key in
the order they first appear, and a group's fleet-wide part followed by each site's."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def group_by(
    items: Iterable[T], key: Callable[[T], K], keep: Callable[[T], bool] | None = None
) -> dict[K, list[T]]:
    """`items` (those `keep` accepts) by `key`, groups and their members in the order they
    came: transfers.jsonl's order is the order the transfers ran."""
    groups: dict[K, list[T]] = {}
    for item in items:
        if keep is None or keep(item):
            groups.setdefault(key(item), []).append(item)
    return groups


def fleet_and_sites(
    items: list[T], site_of: Callable[[T], str], fleet: str = ""
) -> Iterator[tuple[str, list[T]]]:
    """(`fleet`, every item), then (site, its items) for each site in name order when
    there are several (with one site the fleet's row says it all)."""
    sites = sorted({site_of(item) for item in items})
    yield fleet, items
    if len(sites) > 1:
        for site in sites:
            yield site, [item for item in items if site_of(item) == site]
