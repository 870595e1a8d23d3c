"""The topology of one testbed, described before anything is built (pure functions).

A router namespace in the middle and one namespace per endpoint (the primary, and one or
more secondaries), each joined to the router by a veth pair of its own: a star, so that
every secondary has a link of its own and the primary's segment is the one every transfer
crosses. Every name carries the testbed id so two runs coexist and `xfrbench clean` can tell
the harness's namespaces from anyone else's. Addresses come from a block the harness
reserves (RFC 2544's 198.18.0.0/15 by default); each testbed takes one slice of it and
splits it into one segment per endpoint.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass

from harness.plan.endpoint import Endpoint
from harness.spec import HostsSpec, LinkSpec

PREFIX = "xfb-"
ROUTER = "router"
ID_RE = re.compile(r"^[0-9a-f]{6}$")
NETNS_RE = re.compile(r"^xfb-(?P<id>[0-9a-f]{6})-(?P<host>[pr]|s\d*)$")
# A slice is a /24 unless the block is smaller (one slice of its own size) or the endpoints
# need more addresses.
SLICE_PREFIXLEN = 24
# A point-to-point segment needs two host addresses (/30); compose also needs docker's
# gateway in each (/29).
NETNS_SEGMENT_PREFIXLEN = 30
COMPOSE_SEGMENT_PREFIXLEN = 29


def two_hosts(link: LinkSpec, hosts: HostsSpec | None = None) -> tuple[Endpoint, Endpoint]:
    """One primary and one secondary with `link` between them (the classic testbed)."""
    hosts = hosts or HostsSpec()
    return (
        Endpoint("primary", "primary", hosts.primary),
        Endpoint("secondary", "secondary", hosts.secondary, link),
    )


def netns_suffixes(endpoints: list[Endpoint] | tuple[Endpoint, ...]) -> dict[str, str]:
    """Endpoint name -> the short suffix of its namespace: p, s (one secondary) or s1..sN."""
    secondaries = [e.name for e in endpoints if e.role == "secondary"]
    out = {e.name: "p" for e in endpoints if e.role == "primary"}
    if len(out) != 1:
        raise ValueError(f"a testbed has exactly one primary, got {len(out)}")
    if len(secondaries) == 1:
        out[secondaries[0]] = "s"
    else:
        out |= {name: f"s{index}" for index, name in enumerate(secondaries, start=1)}
    if len(out) != len(endpoints):
        raise ValueError("endpoint names must be unique")
    return out


def netns_name(testbed_id: str, suffix: str) -> str:
    return f"{PREFIX}{testbed_id}-{suffix}"


def is_testbed_id(text: str) -> bool:
    return bool(ID_RE.match(text))


@dataclass(frozen=True)
class Segment:
    """One veth pair between the router and an endpoint."""

    endpoint: str  # the endpoint's name
    subnet: str  # e.g. 198.18.7.0/25
    router_if: str  # the router's end, inside the router namespace
    host_if: str  # the endpoint's end, inside the endpoint namespace
    router_address: str
    host_address: str

    @property
    def prefixlen(self) -> int:
        return ipaddress.IPv4Network(self.subnet).prefixlen


@dataclass(frozen=True)
class TopologyPlan:
    testbed_id: str
    block: str
    slice: str
    namespaces: dict[str, str]  # endpoint name (and "router") -> netns name
    segments: dict[str, Segment]  # endpoint name -> its segment

    def address(self, name: str) -> str:
        """The address other hosts reach `name` at (the router: on the primary's segment)."""
        if name == ROUTER:
            primary = next(iter(self.segments.values()))
            return primary.router_address
        return self.segments[name].host_address


def parse_block(block: str) -> ipaddress.IPv4Network:
    try:
        network = ipaddress.IPv4Network(block, strict=True)
    except ValueError as exc:
        raise ValueError(f"{block!r} is not an IPv4 network such as 198.18.0.0/15 ({exc})") from exc
    if network.prefixlen > COMPOSE_SEGMENT_PREFIXLEN:
        raise ValueError(f"{block} is too small; a testbed needs at least a /29 (8 addresses)")
    return network


def slice_prefixlen(
    block: ipaddress.IPv4Network, endpoints: int = 2, segment: int = NETNS_SEGMENT_PREFIXLEN
) -> int:
    """The slice for `endpoints` segments of at least /`segment` each, within `block`."""
    needed = segment - math.ceil(math.log2(max(endpoints, 2)))
    prefixlen = max(min(SLICE_PREFIXLEN, needed), block.prefixlen)
    if prefixlen > needed:
        raise ValueError(
            f"{block} holds {2 ** (segment - block.prefixlen)} segments of /{segment}; "
            f"{endpoints} endpoints need more"
        )
    return prefixlen


def slice_count(block: str, prefixlen: int | None = None) -> int:
    network = parse_block(block)
    return 2 ** ((prefixlen or slice_prefixlen(network)) - network.prefixlen)


def slice_at(block: str, index: int, prefixlen: int | None = None) -> str:
    network = parse_block(block)
    prefixlen = prefixlen or slice_prefixlen(network)
    size = 2 ** (32 - prefixlen)
    count = slice_count(block, prefixlen)
    if not 0 <= index < count:
        raise ValueError(f"slice {index} is outside {block} ({count} slices)")
    base = int(network.network_address) + index * size
    return f"{ipaddress.IPv4Address(base)}/{prefixlen}"


def choose_slice(block: str, testbed_id: str, used: set[str], prefixlen: int | None = None) -> str:
    """The id picks a starting slice (spreads runs out); skip slices other testbeds hold."""
    count = slice_count(block, prefixlen)
    start = int(testbed_id, 16) % count
    for step in range(count):
        candidate = slice_at(block, (start + step) % count, prefixlen)
        if not any(_overlaps(candidate, other) for other in used):
            return candidate
    raise LookupError(
        f"all {count} address slices of {block} are held by other testbeds; "
        "run `xfrbench clean` or give a larger block"
    )


def _overlaps(a: str, b: str) -> bool:
    try:
        return ipaddress.IPv4Network(a).overlaps(ipaddress.IPv4Network(b))
    except ValueError:
        return False


def plan_topology(
    testbed_id: str,
    block: str,
    slice_: str,
    endpoints: list[Endpoint] | tuple[Endpoint, ...],
) -> TopologyPlan:
    """Names, interfaces and addresses: the slice split into one segment per endpoint (the
    primary's first), the router .1 and the endpoint .2 of each."""
    if not is_testbed_id(testbed_id):
        raise ValueError(f"{testbed_id!r} is not a testbed id (6 lowercase hex digits)")
    parse_block(block)
    suffixes = netns_suffixes(endpoints)
    ordered = sorted(endpoints, key=lambda e: e.role != "primary")  # stable: primary first
    bits = math.ceil(math.log2(max(len(ordered), 2)))
    subnets = list(ipaddress.IPv4Network(slice_).subnets(prefixlen_diff=bits))
    segments: dict[str, Segment] = {}
    for endpoint, subnet in zip(ordered, subnets, strict=False):
        hosts = list(subnet.hosts())
        suffix = suffixes[endpoint.name]
        segments[endpoint.name] = Segment(
            endpoint=endpoint.name,
            subnet=str(subnet),
            router_if=f"veth-{suffix}",
            host_if="veth-r",
            router_address=str(hosts[0]),
            host_address=str(hosts[1]),
        )
    namespaces = {e.name: netns_name(testbed_id, suffixes[e.name]) for e in ordered}
    namespaces[ROUTER] = netns_name(testbed_id, "r")
    return TopologyPlan(testbed_id, block, slice_, namespaces, segments)
