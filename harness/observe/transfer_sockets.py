"""What one transfer left in the TCP tables, counted from sock_diag dumps taken before it
and after it (pure; harness/measure/watch.py takes the dumps).

A namespace's TIME_WAIT count measures the schedule, not the transfer: sockets linger 60 s,
so it climbs through a run with every transfer before (and the harness's own read-backs),
and a case's value depends on where the shuffle put it. These figures are the transfer's
own, the same for every repeat whatever ran before:

- ``pair_sockets``: on the address pair of the primary and one secondary, the connections
  each side opened (the new connections whose ephemeral end is its address) and the new
  TIME_WAIT sockets each side holds (those whose own end is its address, in whichever
  namespace the active closer left them). A connection is told by its two ends: one on a
  DNS port (53 or 853: the side that listened), the other the opener's ephemeral port. It
  counts once whether its client socket, its server socket or both were dumped. Ports the
  primary's wire saw the secondary send SYNs from (``syn_ports``) count too: a connection
  reset before the dump leaves no socket.
- ``own_sockets``: in one host's namespace, the harness's connections (both ends in that
  namespace: loopback, or the host's address at both ends), which the harness makes from
  inside it: its verification read-back from 127.0.0.1, SOA queries over TCP, the primary
  check, dynamic updates, control commands over TCP (rndc). Counted apart, never as a
  server's.

A fleet's concurrent transfers never mix: each secondary has its own address, so each pair
holds only its own transfer's sockets (the primary's side of pair i is in the same
namespace as the others', told apart by the secondary's address).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.core.transport import DNS_PORT, XOT_PORT
from harness.observe.sockdiag_wire import DiagSocket

DNS_PORTS = frozenset({DNS_PORT, XOT_PORT})
TIME_WAIT = "time_wait"
# On their way to TIME_WAIT (or gone): the after-dump is taken again while a new connection
# on a pair is in one of these, so that a transfer's close is counted, not raced.
CLOSING = frozenset({"fin_wait1", "fin_wait2", "close_wait", "last_ack", "closing"})


@dataclass(frozen=True)
class Ends:
    """One socket as a dump shows it: its state, its own end and the remote one."""

    state: str
    src: str
    sport: int
    dst: str
    dport: int

    @classmethod
    def of(cls, sock: DiagSocket) -> Ends:
        return cls(sock.state_name, _plain(sock.src), sock.sport, _plain(sock.dst), sock.dport)


def ends(sockets: Iterable[DiagSocket]) -> list[Ends]:
    return [Ends.of(s) for s in sockets]


def _plain(address: str) -> str:
    """An IPv4 peer seen through an IPv6 socket (::ffff:192.0.2.1) as its IPv4 text."""
    return address.removeprefix("::ffff:") if "." in address else address


End = tuple[str, int]
Connection = tuple[End, End]  # (opener's end, listener's end)


def pair_connection(sock: Ends, a: str, b: str) -> Connection | None:
    """The connection `sock` belongs to when it joins a and b with one end on a DNS port;
    None otherwise (another pair, or no end or both ends on a DNS port)."""
    if a == b or {sock.src, sock.dst} != {a, b}:
        return None
    here, there = (sock.src, sock.sport), (sock.dst, sock.dport)
    if there[1] in DNS_PORTS and here[1] not in DNS_PORTS:
        return here, there
    if here[1] in DNS_PORTS and there[1] not in DNS_PORTS:
        return there, here
    return None


def _on_pair(sockets: Iterable[Ends], a: str, b: str) -> dict[Ends, Connection]:
    found = {}
    for sock in sockets:
        connection = pair_connection(sock, a, b)
        if connection is not None:
            found[sock] = connection
    return found


def pair_sockets(
    before: Iterable[Ends],
    after: Iterable[Ends],
    primary: str,
    secondary: str,
    syn_ports: Iterable[int] = (),
) -> dict[str, Any]:
    """Per side ("primary", "secondary"): ``connections``, the connections it opened to the
    other between the two dumps, and ``time_wait_left``, the TIME_WAIT sockets of those
    connections whose own end is its address; ``still_open``, those of them neither in
    TIME_WAIT nor closing at the second dump. `before` and `after`: every socket dumped in
    either host's namespace (a socket dumped twice counts once); `syn_ports`: the source
    ports the secondary's SYNs to the primary came from in that time (its wire)."""
    now = _new_on_pair(before, after, primary, secondary)
    opened_by: dict[str, set[End]] = {
        "primary": set(),
        "secondary": {(secondary, port) for port in syn_ports},
    }
    for opener, _ in set(now.values()):
        opened_by["primary" if opener[0] == primary else "secondary"].add(opener)
    out: dict[str, Any] = {}
    for side, address in (("primary", primary), ("secondary", secondary)):
        waiting = {s for s in now if s.state == TIME_WAIT and s.src == address}
        out[side] = {"connections": len(opened_by[side]), "time_wait_left": len(waiting)}
    out["still_open"] = len(
        {c for s, c in now.items() if s.state != TIME_WAIT and s.state not in CLOSING}
    )
    return out


def _new_on_pair(
    before: Iterable[Ends], after: Iterable[Ends], a: str, b: str
) -> dict[Ends, Connection]:
    """The sockets of `after` on the pair whose connection `before` did not hold."""
    old = set(_on_pair(before, a, b).values())
    return {s: c for s, c in _on_pair(after, a, b).items() if c not in old}


def closing(
    before: list[Ends], after: list[Ends], pairs: Iterable[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The pairs (primary, secondary addresses) with a new connection still closing
    (CLOSING): their namespaces are dumped again until none is."""
    return [
        (a, b)
        for a, b in pairs
        if any(s.state in CLOSING for s in _new_on_pair(before, after, a, b))
    ]


def _local(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def own_connection(sock: Ends) -> frozenset[End] | None:
    """Both ends of a connection made inside one namespace (loopback, or one address at
    both ends), unordered: its client and server sockets name it alike. None otherwise."""
    if sock.state == "listen":
        return None
    if sock.src == sock.dst or (_local(sock.src) and _local(sock.dst)):
        return frozenset({(sock.src, sock.sport), (sock.dst, sock.dport)})
    return None


def own_sockets(before: Iterable[Ends], after: Iterable[Ends]) -> dict[str, Any]:
    """The connections made inside one namespace between its two dumps: ``connections``
    (distinct), ``time_wait_left`` (their TIME_WAIT sockets at the second dump: one still
    closing then is not yet one) and ``ports``, the ports they were made to (the lower end
    of each: the listener's, 53 for DNS, 953 for rndc)."""
    old = {c for s in before if (c := own_connection(s)) is not None}
    new: dict[frozenset[End], list[Ends]] = {}
    for sock in after:
        connection = own_connection(sock)
        if connection is not None and connection not in old:
            new.setdefault(connection, []).append(sock)
    return {
        "connections": len(new),
        "time_wait_left": sum(s.state == TIME_WAIT for socks in new.values() for s in socks),
        "ports": sorted({min(port for _, port in c) for c in new}),
    }


def transfer_sockets(
    before: Mapping[str, list[Ends]],
    after: Mapping[str, list[Ends]],
    later: Mapping[str, list[Ends]],
    addresses: Mapping[str, str],
    syn_ports: Iterable[int] = (),
) -> dict[str, Any]:
    """A record's ``extra["sockets"]``: dumps keyed by role ("primary", "secondary") of each
    host's namespace, taken at the transfer's start (`before`), once it ended (`after`) and
    once the harness has read the copy back (`later`); `addresses` the two hosts'."""
    everything_before = [s for socks in before.values() for s in socks]
    everything_after = [s for socks in after.values() for s in socks]
    primary, secondary = addresses["primary"], addresses["secondary"]
    figures = pair_sockets(everything_before, everything_after, primary, secondary, syn_ports)
    figures["harness"] = {
        role: own_sockets(before.get(role, []), socks) for role, socks in later.items()
    }
    return figures
