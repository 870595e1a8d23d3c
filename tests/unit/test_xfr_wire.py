"""Pure wire logic: serial arithmetic, message splitting, names, SOA scans, the tracker."""

from __future__ import annotations

import struct

import dns.message
import dns.name
import dns.rrset
import pytest

from harness.xfr import wire as w
from harness.xfr.serial import serial_add, serial_ge, serial_gt, serial_lt


@pytest.mark.parametrize(
    ("a", "b", "gt"),
    [
        (2, 1, True),
        (1, 2, False),
        (1, 1, False),
        (0, 0xFFFFFFFF, True),  # wrapped around
        (0xFFFFFFFF, 0, False),
        (2**31 - 1, 0, True),
        (2**31, 0, False),  # exactly half way: undefined, never "newer"
        (0, 2**31, False),
        (100, 2**31 + 101, True),  # 2^31 - 1 ahead after wrapping
    ],
)
def test_serial_gt(a: int, b: int, gt: bool) -> None:
    assert serial_gt(a, b) is gt


def test_serial_ge_lt_add() -> None:
    assert serial_ge(5, 5) and serial_ge(0, 0xFFFFFFFF) and not serial_ge(4, 5)
    assert serial_lt(0xFFFFFFFF, 3)
    assert serial_add(0xFFFFFFFF, 2) == 1
    with pytest.raises(ValueError):
        serial_add(1, 2**31)
    with pytest.raises(ValueError):
        serial_gt(-1, 0)
    with pytest.raises(ValueError):
        serial_ge(2**32, 0)


def test_split_messages_keeps_incomplete_tail() -> None:
    stream = w.frame(b"A" * 12) + w.frame(b"B" * 300) + b"\x01\x00" + b"C" * 10
    messages, pos = w.split_messages(stream)
    assert messages == [b"A" * 12, b"B" * 300]
    assert pos == 2 + 12 + 2 + 300
    more, pos2 = w.split_messages(stream + b"C" * 246, pos)
    assert more == [b"C" * 256] and pos2 == len(stream) + 246
    assert w.split_messages(b"\x00")[0] == []
    with pytest.raises(w.WireError):
        w.frame(b"x" * 70000)


def _axfr_message(records: list[str], *, question: bool = True, qid: int = 7) -> bytes:
    query = dns.message.make_query("example.", "AXFR")
    query.id = qid
    response = dns.message.make_response(query)
    if not question:
        response.question = []
    for text in records:
        response.answer.append(dns.rrset.from_text(*text.split(None, 4)))
    return response.to_wire()


SOA1 = "example. 3600 IN SOA ns1.example. hostmaster.example. 1 900 300 604800 900"
SOA2 = "example. 3600 IN SOA ns1.example. hostmaster.example. 2 900 300 604800 900"


def test_header_and_answer_walk_count_records() -> None:
    msg = _axfr_message([SOA1, "www.example. 60 IN A 192.0.2.1", "Mail.Example. 60 IN A 1.2.3.4"])
    header = w.parse_header(msg)
    assert (header.id, header.qdcount, header.ancount) == (7, 1, 3)
    assert header.is_response and not header.truncated and header.rcode == 0
    tracker = w.TransferTracker("axfr")
    off = w.skip_questions(msg, 12, header.qdcount)
    end = w.walk_answers(msg, off, header.ancount, tracker, b"\x07example\x00", {})
    assert end == len(msg)
    assert tracker.started and not tracker.done and tracker.final_serial == 1
    with pytest.raises(w.WireError):
        w.parse_header(b"\x00" * 11)


def test_read_name_decompresses_lowercases_and_caches() -> None:
    msg = _axfr_message([SOA1, "WWW.Example. 60 IN A 192.0.2.1", "a.www.example. 60 IN A 1.1.1.1"])
    header = w.parse_header(msg)
    off = w.skip_questions(msg, 12, header.qdcount)
    cache: w.NameCache = {}
    names = []
    for _ in range(header.ancount):
        wire_name, key, pos = w.read_name(msg, off, cache)
        names.append((wire_name, key))
        rdlen = struct.unpack_from("!H", msg, pos + 8)[0]
        off = pos + 10 + rdlen
    assert names[1][0] == dns.name.from_text("www.example.").to_digestable()
    assert names[2][0] == b"\x01a\x03www\x07example\x00"
    # Canonical order: the apex, then www, then its child a.www.
    assert names[0][1] < names[1][1] < names[2][1]
    assert cache  # suffixes were remembered


def test_name_keys_sort_in_canonical_order() -> None:
    # RFC 4034 section 6.1's example, shuffled.
    ordered = [
        "example.",
        "a.example.",
        "yljkjljk.a.example.",
        "Z.a.example.",
        "zABC.a.EXAMPLE.",
        "z.example.",
        "\\001.z.example.",
        "*.z.example.",
        "\\200.z.example.",
    ]
    keys = [w.name_key_from_labels(dns.name.from_text(n).labels[:-1]) for n in ordered]
    assert sorted(keys) == keys
    assert sorted(dns.name.from_text(n) for n in reversed(ordered)) == [
        dns.name.from_text(n) for n in ordered
    ]


def test_read_name_rejects_forward_pointers_and_bad_labels() -> None:
    msg = b"\x00" * 12 + b"\xc0\x0e\x00"  # pointer to itself + 2: forward
    with pytest.raises(w.WireError, match="backwards"):
        w.read_name(msg, 12, {})
    with pytest.raises(w.WireError, match="bad label"):
        w.read_name(b"\x00" * 12 + b"\x80abc", 12, {})
    with pytest.raises(w.WireError, match="past the end"):
        w.read_name(b"\x00" * 12 + b"\x05ab", 12, {})


def test_may_end_with_soa_finds_every_soa_end() -> None:
    with_soa = _axfr_message(["www.example. 60 IN A 192.0.2.1", SOA1])
    without = _axfr_message([SOA1, "www.example. 60 IN A 192.0.2.1"])
    txt = _axfr_message([SOA1, 'www.example. 60 IN TXT "\\000\\006 not an SOA"'])
    assert w.may_end_with_soa(with_soa, len(with_soa))
    assert not w.may_end_with_soa(without, len(without))
    assert not w.may_end_with_soa(txt, len(txt))


def test_soa_serial_reads_past_compressed_names() -> None:
    msg = _axfr_message([SOA2])
    off = w.skip_questions(msg, 12, 1)
    pos = w.skip_name(msg, off)
    rdlen = struct.unpack_from("!H", msg, pos + 8)[0]
    assert w.soa_serial(msg, pos + 10, rdlen) == 2


def feed(tracker: w.TransferTracker, sequence: list[int | str]) -> None:
    """ints are apex SOAs with that serial, strings other records."""
    for item in sequence:
        if isinstance(item, int):
            tracker.soa(True, item)
        else:
            tracker.other()


def test_tracker_axfr() -> None:
    tracker = w.TransferTracker("axfr")
    feed(tracker, [5, "a", "b"])
    tracker.others(100)
    assert not tracker.done
    feed(tracker, [5])
    assert tracker.done and tracker.final_serial == 5
    with pytest.raises(w.TransferFormError, match="after the closing SOA"):
        tracker.other()
    with pytest.raises(w.TransferFormError, match="not the zone's SOA"):
        feed(w.TransferTracker("axfr"), ["a"])
    with pytest.raises(w.TransferFormError, match="inside the transfer"):
        feed(w.TransferTracker("axfr"), [5, "a", 6])


def test_tracker_ixfr_styles() -> None:
    up = w.TransferTracker("ixfr", 7)
    feed(up, [7])
    assert up.done and up.style == "up-to-date"

    inc = w.TransferTracker("ixfr", 7)
    feed(inc, [9, 7, "del", 8, "add", 8, 9, "add", 9])
    assert inc.done and inc.style == "incremental" and inc.final_serial == 9

    axfr_style = w.TransferTracker("ixfr", 7)
    feed(axfr_style, [9, "a", "b", 9])
    assert axfr_style.done and axfr_style.style == "axfr-style" and axfr_style.mode == "axfr"

    with pytest.raises(w.TransferFormError, match="older than"):
        feed(w.TransferTracker("ixfr", 7), [6])
    with pytest.raises(w.TransferFormError, match="expected 7"):
        feed(w.TransferTracker("ixfr", 7), [9, 6, "del", 9, "add", 9])
    with pytest.raises(w.TransferFormError, match="empty IXFR"):
        feed(w.TransferTracker("ixfr", 7), [9, 9])
    with pytest.raises(ValueError):
        w.TransferTracker("ixfr")


def test_find_tsig_locates_the_signature() -> None:
    import dns.tsigkeyring

    keyring = dns.tsigkeyring.from_text({"k1.": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="})
    query = dns.message.make_query("example.", "AXFR")
    query.use_tsig(keyring, keyname="k1.")
    data = query.to_wire()
    where = w.find_tsig(data, b"\x02k1\x00")
    assert where is not None
    assert data[where.start : where.start + 4] == b"\x02k1\x00"
    assert where.rdata_off + where.rdlen == len(data)
    assert w.find_tsig(_axfr_message([SOA1]), b"\x02k1\x00") is None
