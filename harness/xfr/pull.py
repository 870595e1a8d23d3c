"""The harness's own AXFR/IXFR reader over TCP or XoT (RFC 9103), with optional TSIG.

Fast path: the stream is read into one large buffer and cut into messages; a message is
counted from its header (ANCOUNT) and only its tail is scanned for the SOA that could close
the transfer (``wire.may_end_with_soa``); it is parsed record by record only when that scan
says it may end with an SOA, when it is the first message, when the IXFR style is still
unknown or incremental, or when a digest is wanted. TSIG is checked on every signed message
with ``dns.tsig.validate`` on the raw wire (unsigned messages in between are fed into the
running MAC, as RFC 8945 5.3.1 allows for up to 99 of them); a wrong key fails.

Failures never raise: they come back as ``PullResult(ok=False, error=...)``.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.netns import socket_in
from harness.core.transport import DNS_PORT, XOT_PORT
from harness.xfr import PullResult, TsigKey, XfrKind
from harness.xfr import wire as w
from harness.xfr.digest import DigestBuilder

RECV_BUFFER = 4 << 20  # bytes; one recv() can take what the kernel has queued
MAX_UNSIGNED_RUN = 99  # RFC 8945 5.3.1


# TSIG error codes (RFC 8945 section 3); 16 is BADSIG here, not EDNS BADVERS.
_TSIG_ERRORS = {16: "BADSIG", 17: "BADKEY", 18: "BADTIME", 22: "BADTRUNC"}


class _Failed(Exception):
    """Ends a pull; the text is the PullResult error."""


def xot_context(
    ca_file: Path | str | None = None,
    *,
    verify: bool = True,
    cert_file: Path | str | None = None,
    key_file: Path | str | None = None,
) -> ssl.SSLContext:
    """A client context for XoT as RFC 9103 asks: TLS 1.3 only, ALPN "dot", the server's
    certificate checked against ``ca_file`` (or the system store) and its name or IP SAN
    (``verify=False`` is opportunistic: encrypted, not authenticated)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols(["dot"])
    if verify:
        if ca_file is not None:
            ctx.load_verify_locations(cafile=str(ca_file))
        else:
            ctx.load_default_certs()
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file is not None:
        ctx.load_cert_chain(str(cert_file), None if key_file is None else str(key_file))
    return ctx


def build_query(
    zone: str, xfr: XfrKind, serial: int | None, tsig: TsigKey | None
) -> tuple[bytes, int, bytes | None]:
    """(query wire, message id, request MAC or None) for an AXFR/IXFR query."""
    import dns.message
    import dns.name
    import dns.rdataclass
    import dns.rdatatype
    import dns.rrset

    name = dns.name.from_text(zone)
    query = dns.message.make_query(name, dns.rdatatype.AXFR if xfr == "axfr" else "IXFR")
    if xfr == "ixfr":
        if serial is None:
            raise ValueError("an IXFR pull needs serial= (the client's current serial)")
        # RFC 1995: the client's SOA goes in the authority section; only its serial matters.
        soa = dns.rrset.from_text(name, 0, "IN", "SOA", f". . {serial} 0 0 0 0")
        query.authority.append(soa)
    if tsig is not None:
        key = tsig.to_dnspython()
        query.use_tsig({key.name: key}, keyname=key.name, algorithm=key.algorithm)
    data = query.to_wire()
    mac = query.mac if tsig is not None else None
    return data, query.id, mac


@dataclass
class _TsigState:
    key: Any  # dns.tsig.Key
    key_wire: bytes
    request_mac: bytes
    ctx: Any = None
    unsigned_run: int = 0
    signed: int = 0

    def check(self, msg: bytes, header: w.Header, index: int) -> int:
        """Verify (or fold into the running MAC) one message; the offset where its signed
        part ends (the TSIG record), or its length when unsigned."""
        import dns.exception
        import dns.name
        import dns.rdata
        import dns.rdataclass
        import dns.rdatatype
        import dns.tsig

        where = None if header.arcount == 0 else w.find_tsig(msg, self.key_wire)
        if where is None:
            if index == 0:
                raise _Failed("TSIG: the first response message is not signed")
            self.unsigned_run += 1
            if self.unsigned_run > MAX_UNSIGNED_RUN:
                raise _Failed(f"TSIG: more than {MAX_UNSIGNED_RUN} unsigned messages in a row")
            self.ctx.update(msg)
            return len(msg)
        try:
            owner, _ = dns.name.from_wire(msg, where.start)
            rdata = dns.rdata.from_wire(
                dns.rdataclass.ANY, dns.rdatatype.TSIG, msg, where.rdata_off, where.rdlen
            )
            self.ctx = dns.tsig.validate(
                msg,
                self.key,
                owner,
                rdata,
                int(time.time()),
                self.request_mac,
                where.start,
                self.ctx,
                multi=True,
            )
        except (dns.exception.DNSException, ValueError) as exc:
            name = type(exc).__name__
            detail = str(exc) if str(exc) and str(exc) != name else ""
            raise _Failed(
                f"TSIG verification failed on message {index + 1}: {name}"
                + (f" ({detail})" if detail else "")
            ) from None
        self.unsigned_run = 0
        self.signed += 1
        return where.start


@dataclass
class _Transfer:
    """Per-pull protocol state around the tracker (no I/O)."""

    zone: str
    xfr: XfrKind
    qid: int
    qtype: int
    apex_wire: bytes
    tracker: w.TransferTracker
    tsig: _TsigState | None
    digest: DigestBuilder | None
    keep: list[bytes] | None
    messages: int = 0
    records: int = 0
    walked: int = 0
    wire_bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def feed(self, msg: bytes) -> None:
        index = self.messages
        try:
            header = w.parse_header(msg)
        except w.WireError as exc:
            raise _Failed(f"message {index + 1}: {exc}") from None
        if header.id != self.qid:
            raise _Failed(f"message {index + 1} has id {header.id}, expected {self.qid}")
        if not header.is_response:
            raise _Failed(f"message {index + 1} is not a response (QR=0)")
        if header.rcode != 0:
            raise _Failed(_rcode_error(msg, header.rcode, index))
        if header.truncated:
            raise _Failed(f"message {index + 1} has the TC bit set")
        self.messages += 1
        self.wire_bytes += len(msg) + 2
        self.records += header.ancount
        signed_end = len(msg) if self.tsig is None else self.tsig.check(msg, header, index)
        if self.keep is not None:
            self.keep.append(msg)
        tracker = self.tracker
        # The tail scan needs the answer section to end where the message (or its TSIG)
        # ends; a repeated question section in front does not matter.
        extra_ar = header.arcount - (1 if signed_end < len(msg) else 0)
        if (
            self.digest is None
            and tracker.started
            and tracker.mode == "axfr"
            and tracker.style_known
            and header.nscount == 0
            and extra_ar == 0
            and not w.may_end_with_soa(msg, signed_end)
        ):
            tracker.others(header.ancount)
            return
        self._walk(msg, header, index)

    def _walk(self, msg: bytes, header: w.Header, index: int) -> None:
        self.walked += 1
        cache: w.NameCache = {}
        try:
            off = 12
            if index == 0 and header.qdcount:
                qname, _, qend = w.read_name(msg, off, cache)
                qtype = w.U16.unpack_from(msg, qend)[0] if qend + 4 <= len(msg) else -1
                if qname != self.apex_wire or qtype != self.qtype:
                    raise _Failed("the first response message answers a different question")
            off = w.skip_questions(msg, off, header.qdcount)
            sink = None
            if self.digest is not None:
                add = self.digest.add_wire

                def sink(m: bytes, o: int, t: int, c: int, ttl: int, ro: int, rl: int) -> None:
                    add(m, o, t, c, ttl, ro, rl, cache)

            w.walk_answers(msg, off, header.ancount, self.tracker, self.apex_wire, cache, sink)
        except w.WireError as exc:
            raise _Failed(f"malformed message {index + 1}: {exc}") from None
        except w.TransferFormError as exc:
            raise _Failed(str(exc)) from None


def _rcode_error(msg: bytes, rcode: int, index: int) -> str:
    import dns.rcode

    text = f"server answered {dns.rcode.to_text(rcode)} (message {index + 1})"
    if rcode == dns.rcode.NOTAUTH:
        # A TSIG error rides in the TSIG record of an otherwise unsigned answer.
        with contextlib.suppress(Exception):
            import dns.message

            parsed = dns.message.from_wire(msg, keyring=False)  # parse, don't validate
            if parsed.tsig:
                error = parsed.tsig[0].error
                if error:
                    text += f", TSIG error {_TSIG_ERRORS.get(error, error)}"
        text += "; TSIG key not accepted or zone not served here"
    elif rcode == dns.rcode.REFUSED:
        text += "; transfers to this client are not allowed (allow-transfer / acl)"
    return text


def _messages(
    sock: socket.socket, deadline: float, timeout: float, t0: float, where: str, state: Any
) -> Iterator[bytes]:
    """The messages of the stream as they complete; records the first byte's time."""
    buf = bytearray(RECV_BUFFER)
    view = memoryview(buf)
    have = 0
    pos = 0
    while True:
        while have - pos >= 2:
            length = (buf[pos] << 8) | buf[pos + 1]
            if have - pos - 2 < length:
                break
            yield bytes(view[pos + 2 : pos + 2 + length])
            pos += 2 + length
        if pos:
            # Keep the incomplete tail at the front; it is shorter than one message.
            buf[: have - pos] = view[pos:have]
            have -= pos
            pos = 0
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Failed(timeout_text(time.monotonic() - t0, where, state))
        sock.settimeout(remaining)
        try:
            got = sock.recv_into(view[have:])
        except TimeoutError:
            raise _Failed(timeout_text(time.monotonic() - t0, where, state)) from None
        if got == 0:
            raise _Failed(
                f"{where} closed the connection after {state.messages} messages, "
                "before the closing SOA"
            )
        if state.first_byte is None:
            state.first_byte = time.monotonic()
        have += got


def timeout_text(elapsed: float, where: str, state: Any) -> str:
    what = "the first message" if state.messages == 0 else f"message {state.messages + 1}"
    return f"timeout after {elapsed:.1f} s waiting for {what} from {where}"


@dataclass
class _Clock:
    messages: int = 0
    first_byte: float | None = None


def pull(
    address: str,
    zone: str,
    *,
    xfr: XfrKind = "axfr",
    serial: int | None = None,
    port: int | None = None,
    netns: str | None = None,
    tsig: TsigKey | None = None,
    tls: ssl.SSLContext | None = None,
    tls_hostname: str | None = None,
    timeout: float = 60.0,
    digest: bool = False,
    keep_records: bool = False,
    on_message: Callable[[bytes, bool], None] | None = None,
    connection: socket.socket | None = None,
) -> PullResult:
    """Transfer ``zone`` from ``address`` and measure it (see ``PullResult``).

    ``serial``: for IXFR, the client's current serial. ``port``: 53, or 853 with ``tls``.
    ``tls``: a context from ``xot_context()``; the server must negotiate ALPN "dot" (RFC
    9103 section 7.1) and present a certificate for ``tls_hostname`` (default: the
    address, matched against IP SANs). ``timeout``: for the whole transfer, connect
    included. ``digest``: compute the zone digest (full-zone answers only).
    ``keep_records``: keep the raw messages (``result.wire``): the timed read stays on the
    fast path and ``digest_of_wire`` verifies it afterwards.
    ``on_message(msg, last)``: called with every response message once the reader has
    checked it (``last``: the message that ends the transfer); ``verify.verify_copy`` spills
    and digests through it. It must not block: the server may close on a slow reader.
    ``connection``: a TCP connection already open to the server (``pull_many``), used and
    left open instead of a new one.
    """
    import dns.name
    import dns.rdatatype

    if port is None:
        port = XOT_PORT if tls is not None else DNS_PORT
    origin = dns.name.from_text(zone)
    zone_text = origin.to_text()
    result = PullResult(ok=False, xfr=xfr, zone=zone_text, method="client-pull-own")
    where = f"{address}#{port}" + (f" (netns {netns})" if netns else "")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    want_digest = digest
    try:
        query, qid, mac = build_query(zone_text, xfr, serial, tsig)
    except ValueError as exc:
        result.error = str(exc)
        return result
    tsig_state = None
    if tsig is not None:
        key = tsig.to_dnspython()
        assert mac is not None
        tsig_state = _TsigState(key, key.name.to_digestable(), mac)
    state = _Transfer(
        zone=zone_text,
        xfr=xfr,
        qid=qid,
        qtype=dns.rdatatype.AXFR if xfr == "axfr" else dns.rdatatype.IXFR,
        apex_wire=origin.to_digestable(),
        tracker=w.TransferTracker(xfr, serial),
        tsig=tsig_state,
        digest=DigestBuilder(origin) if want_digest else None,
        keep=[] if keep_records else None,
    )
    clock = _Clock()
    sock: socket.socket | None = None
    t0 = time.monotonic()
    result.started_at = time.time()
    deadline = t0 + timeout
    try:
        try:
            if connection is not None:
                sock = connection
            else:
                sock = socket_in(netns, family, socket.SOCK_STREAM)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(timeout)
                sock.connect((address, port))
        except TimeoutError:
            raise _Failed(
                f"timeout after {time.monotonic() - t0:.1f} s connecting to {where}"
            ) from None
        except OSError as exc:
            raise _Failed(f"cannot connect to {where}: {exc.strerror or exc}") from None
        t_conn = time.monotonic()
        result.connect_s = t_conn - t0
        if tls is not None:
            sock = _tls_handshake(sock, tls, tls_hostname or address, where, deadline, t0)
            result.tls_s = time.monotonic() - t_conn
        try:
            sock.sendall(w.frame(query))
        except OSError as exc:
            raise _Failed(f"sending the query to {where} failed: {exc}") from None
        for msg in _messages(sock, deadline, timeout, t0, where, clock):
            state.feed(msg)
            clock.messages = state.messages
            if on_message is not None:
                on_message(msg, state.tracker.done)
            if state.tracker.done:
                break
        t_end = time.monotonic()
        if state.tsig is not None and state.tsig.unsigned_run:
            raise _Failed("TSIG: the last response message is not signed")
        result.ok = True
        result.duration_s = t_end - t0
    except _Failed as exc:
        result.error = str(exc)
    except OSError as exc:
        result.error = f"connection to {where} failed: {exc}"
    finally:
        if sock is not None and connection is None:
            sock.close()
    tracker = state.tracker
    result.serial = tracker.final_serial
    result.records = state.records
    result.bytes = state.wire_bytes
    result.messages = state.messages
    if clock.first_byte is not None:
        result.first_byte_s = clock.first_byte - t0
    if xfr == "ixfr":
        result.ixfr_style = tracker.style
    result.extra["messages_parsed"] = state.walked
    if tsig_state is not None:
        result.extra["tsig_signed_messages"] = tsig_state.signed
    if result.ok and state.digest is not None and tracker.mode == "axfr":
        result.digest = state.digest.hexdigest()
    result.wire = state.keep
    return result


def _tls_handshake(
    sock: socket.socket,
    ctx: ssl.SSLContext,
    hostname: str,
    where: str,
    deadline: float,
    t0: float,
) -> ssl.SSLSocket:
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        tls_sock = ctx.wrap_socket(sock, server_hostname=hostname)
    except TimeoutError:
        sock.close()
        raise _Failed(
            f"timeout after {time.monotonic() - t0:.1f} s in the TLS handshake with {where}"
        ) from None
    except ssl.SSLCertVerificationError as exc:
        sock.close()
        raise _Failed(f"TLS: certificate of {where} rejected: {exc.verify_message}") from None
    except (ssl.SSLError, OSError) as exc:
        sock.close()
        raise _Failed(f"TLS handshake with {where} failed: {exc}") from None
    if tls_sock.version() != "TLSv1.3":
        tls_sock.close()
        raise _Failed(f"TLS: {where} negotiated {tls_sock.version()}, XoT needs TLS 1.3")
    if tls_sock.selected_alpn_protocol() != "dot":
        tls_sock.close()
        raise _Failed(
            f"TLS: {where} did not negotiate ALPN 'dot' (RFC 9103 7.1); "
            f"got {tls_sock.selected_alpn_protocol()!r}"
        )
    return tls_sock


def iter_rrsets(result: PullResult) -> Iterator[Any]:
    """The answer records of a pull made with ``keep_records=True``, as dnspython RRsets
    (one record each, in transfer order)."""
    import dns.message

    for msg in result.wire or []:
        parsed = dns.message.from_wire(
            msg, keyring=False, xfr=True, one_rr_per_rrset=True, multi=True
        )
        yield from parsed.answer


def digest_of_wire(result: PullResult, zone: str) -> str | None:
    """The digest of a full-zone pull made with ``keep_records=True``, computed after the
    timed read so that verifying does not slow the measurement. None when nothing was kept."""
    import dns.name
    import dns.rdatatype

    if not result.wire:
        return None
    origin = dns.name.from_text(zone)
    replay = _Transfer(
        zone=zone,
        xfr="axfr",
        qid=w.U16.unpack_from(result.wire[0], 0)[0],
        qtype=dns.rdatatype.AXFR,
        apex_wire=origin.to_digestable(),
        tracker=w.TransferTracker("axfr", None),
        tsig=None,  # TSIG was checked on the read
        digest=DigestBuilder(origin),
        keep=None,
    )
    for msg in result.wire:
        replay.feed(msg)
    assert replay.digest is not None
    return replay.digest.hexdigest()


def pull_verified_copy(server: str, zone: str, **options: Any) -> PullResult:
    """A full copy of `zone` with its digest, read at full speed first and digested after.

    Digesting while reading makes a slow reader, and a server with a short write timeout
    (Knot's tcp-io-timeout is 500 ms) closes on it mid-zone when the CPU is busy: a failure
    of the check, not of the transfer being checked.
    """
    result = pull(server, zone, keep_records=True, **options)
    if result.ok:
        result.digest = digest_of_wire(result, zone)
    result.wire = None  # the digest is what is compared; do not hold a whole zone
    return result


def pull_many(
    address: str,
    zones: list[str],
    *,
    netns: str | None = None,
    port: int = DNS_PORT,
    timeout: float = 60.0,
) -> Iterator[tuple[str, PullResult, bytes]]:
    """AXFR of each zone in turn over one TCP connection (RFC 7766 lets a client send its
    queries one after another on a connection), yielding (zone, result, the response
    stream with its 2-byte length prefixes). Thousands of small zones are read without a
    connection each: no TIME_WAIT port per zone, which would run the reader's namespace out
    of ports at 30 k zones. A server that closes between transfers gets a new connection."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock: socket.socket | None = None
    try:
        for zone in zones:
            for attempt in (1, 2):
                if sock is None:
                    sock = socket_in(netns, family, socket.SOCK_STREAM)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sock.settimeout(timeout)
                    try:
                        sock.connect((address, port))
                    except OSError as exc:
                        sock.close()
                        sock = None
                        failed = PullResult(ok=False, xfr="axfr", zone=zone)
                        failed.error = f"cannot connect to {address}#{port}: {exc}"
                        yield zone, failed, b""
                        break
                stream = bytearray()

                def keep(msg: bytes, last: bool, into: bytearray = stream) -> None:
                    into += len(msg).to_bytes(2, "big") + msg

                result = pull(
                    address,
                    zone,
                    port=port,
                    netns=netns,
                    timeout=timeout,
                    on_message=keep,
                    connection=sock,
                )
                if result.ok or attempt == 2 or result.messages:
                    yield zone, result, bytes(stream)
                    if not result.ok:  # the stream is out of step: start afresh
                        sock.close()
                        sock = None
                    break
                sock.close()  # closed before answering: once more on a new connection
                sock = None
    finally:
        if sock is not None:
            sock.close()
