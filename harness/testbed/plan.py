"""The topology of one testbed, described before anything is built (pure functions).

Three network namespaces in a line, primary <-> router <-> secondary, joined by two veth
pairs. Every name carries the testbed id so two runs coexist and `xfrbench clean` can tell
the harness's namespaces from anyone else's. Addresses come from a block the harness
reserves (RFC 2544's 198.18.0.0/15 by default); each testbed takes one slice of it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

PREFIX = "xfb-"
ROLES = ("primary", "router", "secondary")
_ROLE_SUFFIX = {"primary": "p", "router": "r", "secondary": "s"}
ID_RE = re.compile(r"^[0-9a-f]{6}$")
NETNS_RE = re.compile(r"^xfb-(?P<id>[0-9a-f]{6})-(?P<role>[prs])$")
# A slice is a /24 when the block allows it; a smaller block is one slice of its own size.
SLICE_PREFIXLEN = 24
# Each slice holds two point-to-point segments; a /30 segment still has two host addresses.
MAX_SLICE_PREFIXLEN = 29


def netns_name(testbed_id: str, role: str) -> str:
    return f"{PREFIX}{testbed_id}-{_ROLE_SUFFIX[role]}"


def is_testbed_id(text: str) -> bool:
    return bool(ID_RE.match(text))


@dataclass(frozen=True)
class Segment:
    """One veth pair between the router and an endpoint."""

    endpoint: str  # "primary" or "secondary"
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
    namespaces: dict[str, str]  # role -> netns name
    segments: dict[str, Segment]  # endpoint role -> its segment

    def address(self, role: str) -> str:
        """The address other hosts reach `role` at (the router: its primary-side address)."""
        if role == "router":
            return self.segments["primary"].router_address
        return self.segments[role].host_address


def parse_block(block: str) -> ipaddress.IPv4Network:
    try:
        network = ipaddress.IPv4Network(block, strict=True)
    except ValueError as exc:
        raise ValueError(f"{block!r} is not an IPv4 network such as 198.18.0.0/15 ({exc})") from exc
    if network.prefixlen > MAX_SLICE_PREFIXLEN:
        raise ValueError(
            f"{block} is too small; a testbed needs at least a /{MAX_SLICE_PREFIXLEN} (8 addresses)"
        )
    return network


def slice_prefixlen(block: ipaddress.IPv4Network) -> int:
    return max(SLICE_PREFIXLEN, block.prefixlen)


def slice_count(block: str) -> int:
    network = parse_block(block)
    return 2 ** (slice_prefixlen(network) - network.prefixlen)


def slice_at(block: str, index: int) -> str:
    network = parse_block(block)
    size = 2 ** (32 - slice_prefixlen(network))
    count = slice_count(block)
    if not 0 <= index < count:
        raise ValueError(f"slice {index} is outside {block} ({count} slices)")
    base = int(network.network_address) + index * size
    return f"{ipaddress.IPv4Address(base)}/{slice_prefixlen(network)}"


def choose_slice(block: str, testbed_id: str, used: set[str]) -> str:
    """The id picks a starting slice (spreads runs out); skip slices other testbeds hold."""
    count = slice_count(block)
    start = int(testbed_id, 16) % count
    for step in range(count):
        candidate = slice_at(block, (start + step) % count)
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


def plan_topology(testbed_id: str, block: str, slice_: str) -> TopologyPlan:
    if not is_testbed_id(testbed_id):
        raise ValueError(f"{testbed_id!r} is not a testbed id (6 lowercase hex digits)")
    parse_block(block)
    halves = list(ipaddress.IPv4Network(slice_).subnets(prefixlen_diff=1))
    segments: dict[str, Segment] = {}
    for endpoint, subnet in zip(("primary", "secondary"), halves, strict=True):
        hosts = list(subnet.hosts())
        segments[endpoint] = Segment(
            endpoint=endpoint,
            subnet=str(subnet),
            router_if=f"veth-{_ROLE_SUFFIX[endpoint]}",
            host_if="veth-r",
            router_address=str(hosts[0]),
            host_address=str(hosts[1]),
        )
    return TopologyPlan(
        testbed_id=testbed_id,
        block=block,
        slice=slice_,
        namespaces={role: netns_name(testbed_id, role) for role in ROLES},
        segments=segments,
    )
