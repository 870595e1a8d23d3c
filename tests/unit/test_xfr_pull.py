"""The own reader against an in-process fake server on 127.0.0.1 (no root needed): message
splitting across recv() calls, the fast path, TSIG over many messages, and every failure."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dns.message
import dns.name
import dns.rdatatype
import dns.rrset
import dns.tsig
import dns.zone
import pytest

from harness.xfr import TsigKey, compare_zones
from harness.xfr import wire as w
from harness.xfr.digest import zone_digest_dnspython
from harness.xfr.pull import digest_of_wire, iter_rrsets, pull

KEY = TsigKey("xfr-key", "hmac-sha256", "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=")
OTHER = TsigKey("xfr-key", "hmac-sha256", "b3RoZXJvdGhlcm90aGVyb3RoZXJvdGhlcm90aGVyMTI=")

Responder = Callable[[bytes], list[bytes]]


def make_zone(hosts: int) -> dns.zone.Zone:
    lines = [
        "@ 3600 IN SOA ns1 hostmaster 42 900 300 604800 900",
        "@ 3600 IN NS ns1",
        "ns1 3600 IN A 192.0.2.1",
        'txt 300 IN TXT "x"',
        "Mx 300 IN MX 10 NS1.example.",
    ] + [f"h{i} 300 IN A 10.0.{i // 250}.{i % 250}" for i in range(hosts)]
    return dns.zone.from_text("\n".join(lines) + "\n", origin="example.", relativize=False)


def axfr_rrsets(zone: dns.zone.Zone) -> list[dns.rrset.RRset]:
    soa = zone.find_rrset(zone.origin, "SOA")
    body = [
        dns.rrset.from_rdata_list(name, rds.ttl, list(rds))
        for name, rds in zone.iterate_rdatasets()
        if rds.rdtype != dns.rdatatype.SOA
    ]
    return [soa, *body, soa]


def responses(
    query_wire: bytes,
    rrsets: list[dns.rrset.RRset],
    *,
    per_message: int = 50,
    key: TsigKey | None = None,
    sign_every: int = 1,
    question_everywhere: bool = False,
) -> list[bytes]:
    """Answer ``query_wire`` with ``rrsets`` split over messages, TSIG-signed like a server
    (every ``sign_every``-th message and always the last)."""
    keyring = None
    if key is not None:
        k = key.to_dnspython()
        keyring = {k.name: k}
    query = dns.message.from_wire(query_wire, keyring=keyring if keyring else False)
    chunks = [rrsets[i : i + per_message] for i in range(0, len(rrsets), per_message)]
    out: list[bytes] = []
    ctx = None
    for index, chunk in enumerate(chunks):
        response = dns.message.make_response(query)
        if index and not question_everywhere:
            response.question = []
        response.answer = list(chunk)
        last = index == len(chunks) - 1
        if key is None:
            out.append(response.to_wire())
        elif index % sign_every == 0 or last:
            out.append(response.to_wire(multi=True, tsig_ctx=ctx))
            ctx = response.tsig_ctx
        else:
            response.tsig = None
            data = response.to_wire()
            ctx.update(data)  # RFC 8945 5.3.1: unsigned messages count in the next MAC
            out.append(data)
    return out


@contextmanager
def fake_server(responder: Responder, *, chunk: int = 0, close: bool = False) -> Iterator[int]:
    """Serve one connection: read the framed query, send the framed answers (``chunk``:
    in slices of that many bytes, to split messages across recv calls)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    done = threading.Event()

    def serve() -> None:
        listener.settimeout(5)
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            data = b""
            while True:
                msgs, _ = w.split_messages(data)
                if msgs:
                    break
                part = conn.recv(65536)
                if not part:
                    return
                data += part
            stream = b"".join(w.frame(m) for m in responder(msgs[0]))
            if chunk:
                for i in range(0, len(stream), chunk):
                    conn.sendall(stream[i : i + chunk])
            else:
                conn.sendall(stream)
            if not close:
                done.wait(5)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        thread.join(5)
        listener.close()


ZONE = make_zone(1000)
RRSETS = axfr_rrsets(ZONE)
DIGEST = zone_digest_dnspython(ZONE)


def test_axfr_fast_path_counts_and_splits_across_recvs() -> None:
    with fake_server(lambda q: responses(q, RRSETS, per_message=37), chunk=1000) as port:
        result = pull("127.0.0.1", "example.", port=port, timeout=5)
    assert result.ok, result.error
    assert result.records == len(RRSETS) == 1005 + 1
    assert result.messages == (len(RRSETS) + 36) // 37
    assert result.serial == 42
    # Only the first message and the one ending with the SOA were parsed.
    assert result.extra["messages_parsed"] == 2
    assert result.digest is None
    assert result.bytes == sum(len(m) + 2 for m in responses(_query(), RRSETS, per_message=37))


def test_fast_path_with_question_in_every_message() -> None:
    def responder(q: bytes) -> list[bytes]:
        return responses(q, RRSETS, per_message=37, question_everywhere=True)

    with fake_server(responder) as port:
        result = pull("127.0.0.1", "example.", port=port, timeout=5)
    assert result.ok, result.error
    assert result.records == len(RRSETS) and result.extra["messages_parsed"] == 2


def _query() -> bytes:
    from harness.xfr.pull import build_query

    return build_query("example.", "axfr", None, None)[0]


def test_axfr_digest_and_keep_records() -> None:
    with fake_server(lambda q: responses(q, RRSETS, per_message=100)) as port:
        result = pull("127.0.0.1", "example.", port=port, keep_records=True, timeout=5)
    assert result.ok, result.error
    # keep_records stays on the fast path; the digest is computed afterwards from the wire.
    assert result.digest is None
    result.digest = digest_of_wire(result, "example.")
    assert result.digest == DIGEST
    assert sum(1 for _ in iter_rrsets(result)) == result.records
    assert "wire" not in result.to_dict()
    with fake_server(lambda q: responses(q, RRSETS, per_message=400)) as port:
        other = pull("127.0.0.1", "example.", port=port, digest=True, timeout=5)
    assert compare_zones(result, other) is None


def test_tsig_every_message_and_every_third() -> None:
    for every in (1, 3):
        with fake_server(
            lambda q, e=every: responses(q, RRSETS, per_message=40, key=KEY, sign_every=e)
        ) as port:
            result = pull("127.0.0.1", "example.", port=port, tsig=KEY, digest=True, timeout=5)
        assert result.ok, result.error
        assert result.digest == DIGEST
        signed = {i for i in range(result.messages) if i % every == 0} | {result.messages - 1}
        expected = len(signed)
        assert result.extra["tsig_signed_messages"] == expected


def test_tsig_response_signed_with_another_key_fails() -> None:
    def responder(q: bytes) -> list[bytes]:
        # The server signs with a different secret under the same key name.
        query = dns.message.from_wire(q, keyring=False)
        query.keyring = OTHER.to_dnspython()
        return responses(_resign(q, OTHER), RRSETS, per_message=40, key=OTHER)

    with fake_server(responder) as port:
        result = pull("127.0.0.1", "example.", port=port, tsig=KEY, timeout=5)
    assert not result.ok
    assert "TSIG verification failed on message 1: BadSignature" in (result.error or "")


def _resign(query_wire: bytes, key: TsigKey) -> bytes:
    query = dns.message.from_wire(query_wire, keyring=False)
    k = key.to_dnspython()
    query.use_tsig({k.name: k}, keyname=k.name)
    return query.to_wire()


def _strip_tsig(query_wire: bytes) -> bytes:
    query = dns.message.from_wire(query_wire, keyring=False)
    query.tsig = None
    return query.to_wire()


def test_tsig_unsigned_answer_fails() -> None:
    with fake_server(lambda q: responses(_strip_tsig(q), RRSETS, per_message=40)) as port:
        # The server answers unsigned although the query was signed.
        result = pull("127.0.0.1", "example.", port=port, tsig=KEY, timeout=5)
    assert not result.ok
    assert result.error == "TSIG: the first response message is not signed"


def test_tsig_tampered_middle_message_fails() -> None:
    def responder(q: bytes) -> list[bytes]:
        out = responses(q, RRSETS, per_message=40, key=KEY)
        third = bytearray(out[2])
        third[-200] ^= 0x01  # one bit inside the signed part
        out[2] = bytes(third)
        return out

    with fake_server(responder) as port:
        result = pull("127.0.0.1", "example.", port=port, tsig=KEY, timeout=5)
    assert not result.ok
    assert "message 3" in (result.error or "")


def _answer(rcode: int) -> Responder:
    def responder(q: bytes) -> list[bytes]:
        response = dns.message.make_response(dns.message.from_wire(q))
        response.set_rcode(rcode)
        return [response.to_wire()]

    return responder


@pytest.mark.parametrize(
    ("rcode", "text"),
    [(9, "server answered NOTAUTH"), (5, "server answered REFUSED"), (2, "SERVFAIL")],
)
def test_error_rcodes(rcode: int, text: str) -> None:
    with fake_server(_answer(rcode)) as port:
        result = pull("127.0.0.1", "example.", port=port, timeout=5)
    assert not result.ok and text in (result.error or "")


def test_first_record_not_soa() -> None:
    with fake_server(lambda q: responses(q, RRSETS[1:], per_message=40)) as port:
        result = pull("127.0.0.1", "example.", port=port, timeout=5)
    assert not result.ok and "not the zone's SOA" in (result.error or "")


def test_missing_closing_soa_when_server_closes() -> None:
    with fake_server(lambda q: responses(q, RRSETS[:-1], per_message=40), close=True) as port:
        result = pull("127.0.0.1", "example.", port=port, timeout=5)
    assert not result.ok
    assert "closed the connection after 26 messages, before the closing SOA" in (result.error or "")


def test_missing_closing_soa_times_out() -> None:
    with fake_server(lambda q: responses(q, RRSETS[:-1], per_message=40)) as port:
        result = pull("127.0.0.1", "example.", port=port, timeout=1.0)  # room for a loaded machine
    assert not result.ok
    assert (result.error or "").startswith("timeout after 1.0 s waiting for message 27 from")


def test_wrong_message_id() -> None:
    def responder(q: bytes) -> list[bytes]:
        out = responses(q, RRSETS, per_message=400)
        return [bytes([out[0][0] ^ 0xFF]) + out[0][1:], *out[1:]]

    with fake_server(responder) as port:
        result = pull("127.0.0.1", "example.", port=port, timeout=5)
    assert not result.ok and "has id" in (result.error or "")


def test_ixfr_incremental_and_wrong_question() -> None:
    new_soa = dns.rrset.from_text(
        "example.", 3600, "IN", "SOA", "ns1.example. hostmaster.example. 43 900 300 604800 900"
    )
    old_soa = RRSETS[0]
    gone = dns.rrset.from_text("h1.example.", 300, "IN", "A", "10.0.0.1")
    added = dns.rrset.from_text("new.example.", 300, "IN", "A", "10.9.9.9")
    sequence = [new_soa, old_soa, gone, new_soa, added, new_soa]
    with fake_server(lambda q: responses(q, sequence, per_message=2)) as port:
        result = pull("127.0.0.1", "example.", xfr="ixfr", serial=42, port=port, timeout=5)
    assert result.ok, result.error
    assert (result.ixfr_style, result.serial, result.records) == ("incremental", 43, 6)
    assert result.extra["messages_parsed"] == 3
    with fake_server(lambda q: responses(q, sequence, per_message=2)) as port:
        wrong = pull("127.0.0.1", "other.", xfr="ixfr", serial=42, port=port, timeout=5)
    assert not wrong.ok and "not the zone's SOA" in (wrong.error or "")

    def other_question(q: bytes) -> list[bytes]:
        query = dns.message.from_wire(q)
        query.question[0].name = dns.name.from_text("other.")
        return responses(query.to_wire(), sequence, per_message=2)

    with fake_server(other_question) as port:
        wrong_q = pull("127.0.0.1", "example.", xfr="ixfr", serial=42, port=port, timeout=5)
    assert not wrong_q.ok and "different question" in (wrong_q.error or "")


def test_ixfr_needs_serial() -> None:
    result = pull("127.0.0.1", "example.", xfr="ixfr", port=1, timeout=1)
    assert not result.ok and "needs serial" in (result.error or "")


def test_tsig_key_hides_secret_and_checks_input() -> None:
    from harness.core.errors import UserInputError

    assert KEY.secret not in repr(KEY)
    with pytest.raises(UserInputError):
        TsigKey("k", "hmac-md4", KEY.secret)
    with pytest.raises(UserInputError):
        TsigKey("k", "hmac-sha256", "not base64!")
