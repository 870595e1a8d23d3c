"""New serials without reloading a zone file: RFC 2136 dynamic updates, signed with a per-run
key, sent from inside the primary's namespace.

Reloading a 14 M-record zone to change its serial takes the primary about a minute; an
update that replaces the SOA (and, for an IXFR workload, deletes and adds the change set's
records) takes milliseconds, and what the secondary then transfers is the same. Building the
update is pure (`serial_update`); sending it is thin I/O (`send_update`).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from typing import Any

import dns.message
import dns.name
import dns.opcode
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.update

from harness.core.netns import socket_in
from harness.xfr import TsigKey, XfrError

Record = tuple[Any, int, Any]  # (dns.name.Name, ttl, dns.rdata.Rdata)


def with_serial(soa: dns.rrset.RRset, serial: int) -> dns.rrset.RRset:
    """The zone's SOA RRset with another serial (every other field kept)."""
    (rdata,) = list(soa)
    return dns.rrset.from_rdata(soa.name, soa.ttl, rdata.replace(serial=serial))


def serial_update(
    zone: str,
    soa: dns.rrset.RRset,
    serial: int,
    key: TsigKey,
    *,
    deleted: Iterable[Record] = (),
    added: Iterable[Record] = (),
) -> dns.update.UpdateMessage:
    """One UPDATE that adds `added`, deletes `deleted` and replaces the SOA with `serial`
    (an explicit SOA keeps the server from choosing the serial itself).

    Additions come first: a server applies the update section in order and ignores a
    delete of the last NS RR at the apex (RFC 2136 §3.4.2.4), so a change set that
    replaces a zone's only NS must add the new one before it deletes the old. A CNAME
    added where one exists replaces it (§3.4.2.2), and the delete after it finds nothing:
    the same end state in either order."""
    origin = dns.name.from_text(zone)
    update = dns.update.UpdateMessage(origin)
    for name, ttl, rdata in added:
        if rdata.rdtype != dns.rdatatype.SOA:
            update.add(name, ttl, rdata)
    for name, _ttl, rdata in deleted:
        if rdata.rdtype != dns.rdatatype.SOA:
            update.delete(name, rdata)
    new = with_serial(soa, serial)
    update.replace(new.name, new.ttl, *list(new))
    tsig = key.to_dnspython()
    update.use_tsig({tsig.name: tsig}, keyname=tsig.name, algorithm=tsig.algorithm)
    return update


def query_soa(
    address: str, zone: str, *, netns: str | None, timeout: float = 5.0
) -> dns.rrset.RRset:
    """The SOA RRset `address` serves for `zone` (asked over TCP from `netns`)."""
    query = dns.message.make_query(zone, dns.rdatatype.SOA)
    answer = _exchange(query, address, netns, timeout)
    rrset = answer.get_rrset(
        answer.answer, dns.name.from_text(zone), dns.rdataclass.IN, dns.rdatatype.SOA
    )
    if rrset is None:
        raise XfrError(f"{address} answered no SOA for {zone}: {dns.rcode.to_text(answer.rcode())}")
    return rrset


def send_update(
    update: dns.update.UpdateMessage,
    address: str,
    *,
    netns: str | None,
    timeout: float,
    exchange: Callable[[bytes], bytes] | None = None,
) -> None:
    """Send the update over TCP and require NOERROR (its TSIG answer is verified). With
    `exchange` (the update's wire in, the answer's out: a host's agent sends it next to
    its server), the bytes go that way instead of from `netns`."""
    if exchange is None:
        answer = _exchange(update, address, netns, timeout)
    else:
        wire = update.to_wire()
        answer = dns.message.from_wire(exchange(wire), keyring=update.keyring,
                                       request_mac=update.mac)  # fmt: skip
    if answer.rcode() != dns.rcode.NOERROR:
        raise XfrError(
            f"{address} refused the update of {update.origin}: "
            f"{dns.rcode.to_text(answer.rcode())} (is allow-update set for the per-run key?)"
        )


def exchange_wire(address: str, wire: bytes, timeout: float) -> bytes:
    """One DNS message over TCP from here, its answer's wire back unparsed (an agent's
    relay: the sender checks the answer and its TSIG)."""
    with socket.create_connection((address, 53), timeout=timeout) as sock:
        sock.sendall(len(wire).to_bytes(2, "big") + wire)
        size = int.from_bytes(_read_exactly(sock, 2), "big")
        return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise XfrError(f"the answer ended after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def _exchange(query: dns.message.Message, address: str, netns: str | None, timeout: float) -> Any:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket_in(netns, family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((address, 53))
        return dns.query.tcp(query, address, timeout=timeout, sock=sock)
    except OSError as exc:
        raise XfrError(
            f"no answer from {address} to an {dns.opcode.to_text(query.opcode())}: {exc}"
        ) from None
    finally:
        sock.close()
