"""Does the primary serve what the harness believes it published? Checked after every publish.

The harness keeps the primary's zone as a sum it updates with each change set
(measure/live.py) and verifies every secondary's copy against that belief. A primary that
took a change otherwise (a server ignores a delete of the last NS at the apex, RFC 2136
§3.4.2.4) would make every exact copy look broken. So the primary itself is checked once it
serves the new serial: a small zone whole (its RRSUM, by one AXFR of the primary), a large
one at every name and type the change set touched. A mismatch is the harness's publish
error, never a transfer's failure.

``expectations`` and ``mismatches`` are pure; ``served_rrsets`` asks the primary over one
TCP connection from its own namespace.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import dns.message
import dns.name
import dns.query
import dns.rdatatype

from harness.core.netns import socket_in
from harness.xfr import XfrError
from harness.xfr.rrsum import ZoneSum
from harness.xfr.update import query_soa
from harness.xfr.verify import check_copy, verify_copy

# Zones up to this many records are checked whole: one AXFR of the primary costs tens of ms.
FULL_CHECK_RECORDS = 10_000

Record = tuple[Any, int, Any]  # (dns.name.Name, ttl, dns.rdata.Rdata), as read_diff gives
Key = tuple[str, int]  # (owner name in text, rdata type)


class PublishMismatch(XfrError):
    """The primary does not serve the version the harness published."""


@dataclass
class Expectation:
    present: set[str] = field(default_factory=set)  # rdata (text) that must be served
    absent: set[str] = field(default_factory=set)  # rdata that must be gone


def expectations(deleted: Iterable[Record], added: Iterable[Record]) -> dict[Key, Expectation]:
    """Per (name, type) the change set touched: what must be served and what must be gone
    (the SOA is checked by its serial, not here)."""
    out: dict[Key, Expectation] = {}
    for records, present in ((deleted, False), (added, True)):
        for name, _ttl, rdata in records:
            if rdata.rdtype == dns.rdatatype.SOA:
                continue
            entry = out.setdefault((name.to_text(), rdata.rdtype), Expectation())
            (entry.present if present else entry.absent).add(rdata.to_text())
    for entry in out.values():
        entry.absent -= entry.present  # deleted and added again: served
    return out


def mismatches(expected: dict[Key, Expectation], served: dict[Key, set[str]]) -> list[str]:
    """What the primary serves against what the change set says, one line per difference."""
    out = []
    for (name, rdtype), want in expected.items():
        got = served.get((name, rdtype), set())
        kind = dns.rdatatype.to_text(rdtype)
        for rdata in sorted(want.present - got):
            out.append(f"{name} {kind} {rdata} was added but is not served")
        for rdata in sorted(want.absent & got):
            out.append(f"{name} {kind} {rdata} was deleted but is still served")
    return out


def served_rrsets(
    address: str, keys: Iterable[Key], *, netns: str | None, timeout: float
) -> dict[Key, set[str]]:
    """The rdata `address` serves for each (name, type), asked over one TCP connection from
    `netns`: the answer, or the referral's NS for a delegation point."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    out: dict[Key, set[str]] = {}
    sock = socket_in(netns, family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((address, 53))
        for name, rdtype in keys:
            query = dns.message.make_query(name, rdtype)
            query.flags &= ~dns.flags.RD
            answer = dns.query.tcp(query, address, timeout=timeout, sock=sock)
            wanted = dns.name.from_text(name)
            found: set[str] = set()
            for section in (answer.answer, answer.authority):
                for rrset in section:
                    if rrset.name == wanted and rrset.rdtype == rdtype:
                        found |= {rdata.to_text() for rdata in rrset}
            out[(name, rdtype)] = found
    except (OSError, dns.exception.DNSException) as exc:
        raise XfrError(f"could not ask the primary {address} what it serves: {exc}") from None
    finally:
        sock.close()
    return out


def check_primary_serves(
    address: str,
    zone: str,
    reference: ZoneSum,
    serial: int,
    changed: tuple[list[Record], list[Record]] | None,
    *,
    netns: str | None,
    timeout: float,
) -> str | None:
    """None when the primary at `address` (reached from `netns`) serves `reference` at
    `serial`: a small zone whole, read on loopback in its namespace as every server lets
    the harness read; a large one at its serial and at the names the change set (deleted,
    added) touched. Else what differs."""
    if reference.records <= FULL_CHECK_RECORDS:
        copy = verify_copy("127.0.0.1", zone, netns=netns, timeout=timeout)
        problem = check_copy(reference, copy, serial)
        return None if problem is None else f"the primary's own copy: {problem}"
    served = query_soa(address, zone, netns=netns, timeout=timeout)
    if served[0].serial != serial:
        return f"the primary serves serial {served[0].serial}, not {serial}"
    if changed is None:
        return None
    expected = expectations(*changed)
    wrong = mismatches(expected, served_rrsets(address, expected, netns=netns, timeout=timeout))
    if not wrong:
        return None
    more = f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else ""
    return "the primary's changed names: " + "; ".join(wrong[:3]) + more
