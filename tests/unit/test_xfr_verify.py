"""verify_copy and zone_file_sum: the same RRSUM with the compiled digest (inline, as
messages arrive) and with the Python reference, whether that is digested in the driver,
after the read or by worker processes during it; failures reported with where they
happened."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import dns.zone
import pytest

from harness.core.errors import UserInputError
from harness.xfr import PullResult
from harness.xfr.digest_pool import DigestFailed
from harness.xfr.rrsum import ZoneSum, sum_zone_object
from harness.xfr.rrsum_native import ENV
from harness.xfr.verify import StreamDigester, check_copy, verify_copy
from harness.xfr.zonefile_sum import axfr_text_file_sum, zone_file_sum, zone_set_sums
from harness.zonegen import ZoneSpec, generate
from tests.unit.test_rrsum_native import require_compiled_sum
from tests.unit.test_xfr_pull import KEY, fake_server, responses
from tests.unit.test_xfr_rrsum import axfr, records_of

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def tld(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dns.zone.Zone, ZoneSum]:
    folder = tmp_path_factory.mktemp("zones")
    path = generate(ZoneSpec("tld", 5000, "tld."), cache_dir=folder).files[0].path
    zone = dns.zone.from_file(str(path), origin="tld.", relativize=False)
    return path, zone, sum_zone_object(zone)


@pytest.fixture(params=["rust", "python"])
def digest(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each implementation in turn (test_rrsum_native checks that the extension is built)."""
    if request.param == "python":
        monkeypatch.setenv(ENV, "python")
    else:
        require_compiled_sum()
    return str(request.param)


@pytest.fixture
def python_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python reference, whose worker processes and spill some tests are about."""
    monkeypatch.setenv(ENV, "python")


def feed(digester: StreamDigester, messages: list[bytes]) -> ZoneSum:
    for i, msg in enumerate(messages):
        digester.message(msg, i == len(messages) - 1)
    try:
        return digester.finish(timeout=60)
    finally:
        digester.close()


@pytest.mark.parametrize(
    ("workers", "concurrent"),
    [(0, True), (2, True), (2, False), (1, True)],
)
def test_stream_digester_same_sum_every_way(  # type: ignore[no-untyped-def]
    tld, python_digest, workers: int, concurrent: bool
) -> None:
    _, zone, expected = tld
    messages = axfr(records_of(zone), 60, origin="tld.")
    small = StreamDigester(workers=workers, concurrent=concurrent)
    assert feed(small, messages) == expected  # below INLINE_BYTES: in the driver
    assert small.spilled_bytes == 0
    chunked = StreamDigester(
        workers=workers, concurrent=concurrent, chunk_bytes=3000, inline_bytes=5000
    )
    assert feed(chunked, messages) == expected
    assert chunked.spilled_bytes == chunked.stream_bytes == sum(len(m) + 2 for m in messages)


def test_compiled_stream_digester_sums_inline(tld, digest: str) -> None:  # type: ignore[no-untyped-def]
    _, zone, expected = tld
    messages = axfr(records_of(zone), 60, origin="tld.")
    digester = StreamDigester(chunk_bytes=3000, inline_bytes=5000)
    assert digester.implementation == digest
    assert feed(digester, messages) == expected
    assert digester.stream_bytes == sum(len(m) + 2 for m in messages)
    # The compiled digest needs no spill and no worker; the reference spills this stream.
    assert (digester.spilled_bytes == 0) == (digest == "rust")
    assert digester.worker_pids == []  # closed (reference) or never started (compiled)


def test_stream_digester_reports_a_malformed_message(tld, digest: str) -> None:  # type: ignore[no-untyped-def]
    _, zone, _ = tld
    messages = axfr(records_of(zone), 60, origin="tld.")
    broken = messages[:]
    broken[5] = broken[5][:-7]  # its last record runs past the end
    for workers in (0, 2):
        digester = StreamDigester(workers=workers, chunk_bytes=3000, inline_bytes=5000)
        with pytest.raises(DigestFailed, match="past the end"):
            feed(digester, broken)
    with pytest.raises(ValueError, match="before the last message"):
        StreamDigester().finish()


def test_a_dead_worker_fails_the_digest_not_the_read(tld, python_digest) -> None:  # type: ignore[no-untyped-def]
    _, zone, _ = tld
    messages = axfr(records_of(zone), 60, origin="tld.")
    digester = StreamDigester(workers=1, chunk_bytes=3000, inline_bytes=5000)
    half = len(messages) // 2
    for msg in messages[:half]:
        digester.message(msg, False)
    (pid,) = digester.worker_pids
    os.kill(pid, signal.SIGKILL)  # the worker this test started
    # Until it has died (a zombie, not reaped: its exit status stays for the digester).
    while Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z":
        time.sleep(0.01)  # polling the exit of a killed child
    for i, msg in enumerate(messages[half:]):
        digester.message(msg, half + i == len(messages) - 1)  # never raises
    with pytest.raises(DigestFailed, match=f"worker pid {pid} exited with -9"):
        digester.finish(timeout=30)
    digester.close()


def test_verify_copy_against_a_served_zone(tld, digest: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _, zone, expected = tld
    monkeypatch.setattr("harness.xfr.verify.INLINE_BYTES", 20_000)
    monkeypatch.setattr("harness.xfr.verify.CHUNK_BYTES", 10_000)
    rrsets = [dns.rrset.from_rdata(name, ttl, rd) for name, ttl, rd in records_of(zone)]
    soa = rrsets[0]
    answer = [soa, *rrsets[1:], soa]

    def responder(query: bytes) -> list[bytes]:
        return responses(query, answer, per_message=50, key=KEY, sign_every=3)

    for workers in (0, 2):
        with fake_server(responder, chunk=7000) as port:
            result = verify_copy(
                "127.0.0.1", "tld.", port=port, tsig=KEY, timeout=30, workers=workers
            )
        assert result.ok, result.error
        assert result.digest == expected.text
        assert result.extra["zone_records"] == expected.records == result.records - 1
        assert result.extra["verify_s"] >= result.duration_s > 0
        assert result.extra["digest_implementation"] == digest
        if digest == "python":
            assert result.extra["spilled_bytes"] == result.bytes  # over INLINE_BYTES: spilled
            assert result.extra["digest_workers"] == workers
            assert (result.extra["digest_worker_rss_kb"] > 0) == (workers > 0)
        else:  # summed as the messages came: no spill, no worker
            assert result.extra["spilled_bytes"] == result.extra["digest_workers"] == 0
        assert check_copy(expected, result, serial=1) is None


def test_verify_copy_failure_and_check_copy_messages(tld) -> None:  # type: ignore[no-untyped-def]
    _, zone, expected = tld
    with fake_server(lambda q: []) as port:
        failed = verify_copy("127.0.0.1", "tld.", port=port, timeout=2)
    assert not failed.ok and failed.digest is None
    assert "could not be read" in (check_copy(expected, failed) or "")
    other = PullResult(ok=True, xfr="axfr", zone="tld.", serial=1)
    other.digest = (expected - ZoneSum(1, 1)).text
    problem = check_copy(expected, other, serial=1) or ""
    assert f"expected {expected.records} records" in problem
    assert f"has {expected.records - 1}" in problem
    assert "serial differs" in (check_copy(expected, other, serial=2) or "")
    other.digest = "ab" * 48
    assert "no RRSUM" in (check_copy(expected, other) or "")


def test_zone_file_sum_workers_inline_and_cache(tld, digest, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path, _, expected = tld
    copy = tmp_path / "tld.zone"
    copy.write_bytes(path.read_bytes())
    assert zone_file_sum(copy, "tld.", workers=0, cache=False) == expected
    # Force ranges and worker processes on a small file.
    monkeypatch.setattr("harness.xfr.zonefile_sum.INLINE_BYTES", 1000)
    monkeypatch.setattr("harness.xfr.zonefile_sum.TEXT_CHUNK_BYTES", 20_000)
    assert zone_file_sum(copy, "tld.", workers=2, cache=True) == expected
    cache = copy.with_name(copy.name + ".rrsum")
    assert expected.text in cache.read_text()
    # A cached value is used while the file is unchanged, and only then.
    cache.write_text(cache.read_text().replace(expected.hex, "0" * 64))
    assert zone_file_sum(copy, "tld.") == ZoneSum(0, expected.records)
    with copy.open("ab") as fh:
        fh.write(b"extra.tld. 60 IN A 192.0.2.7\n")
    again = zone_file_sum(copy, "tld.", workers=2)
    assert again.records == expected.records + 1 and again != expected


def test_zone_file_sum_names_the_bad_line(tmp_path: Path, digest, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    lines = [f"h{i}.example. 300 IN A 192.0.2.{i % 250}\n" for i in range(3000)]
    lines[2345] = "h2345.example. 300 IN A 192.0.2.999\n"
    path = tmp_path / "bad.zone"
    path.write_text("".join(lines))
    monkeypatch.setattr("harness.xfr.zonefile_sum.INLINE_BYTES", 1000)
    monkeypatch.setattr("harness.xfr.zonefile_sum.TEXT_CHUNK_BYTES", 10_000)
    for workers in (0, 2):
        with pytest.raises(UserInputError, match=r"bad\.zone:2346: bad rdata") as info:
            zone_file_sum(path, "example.", workers=workers, cache=False)
        assert "named-compilezone" in str(info.value)
    directive = tmp_path / "directive.zone"
    directive.write_text("$TTL 300\n" + "".join(lines[:3]))
    with pytest.raises(UserInputError, match=r"directive\.zone:1: directive \$TTL"):
        zone_file_sum(directive, "example.", cache=False)


def test_axfr_text_file_sum_reads_kdig_output(tld, digest, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _, zone, expected = tld
    monkeypatch.setattr("harness.xfr.zonefile_sum.TEXT_CHUNK_BYTES", 20_000)  # many ranges
    records = records_of(zone)
    text = [";; AXFR for tld.", ""]
    text += [f"{name}\t{ttl}\tIN\t{rd.rdtype.name}\t{rd.to_text()}" for name, ttl, rd in records]
    text += [text[2], ";; Received 123 B (1 messages, 5001 records)", ""]
    out = tmp_path / "kdig.txt"
    out.write_text("\n".join(text))
    assert axfr_text_file_sum(out, "tld.") == expected
    assert os.path.getsize(out) > 0
    # A signed transfer: kdig prints the TSIG as an RR line after the closing SOA
    # (the line from tests/fixtures/kdig_axfr_tsig.txt); it is not zone data.
    tsig = (FIXTURES / "kdig_axfr_tsig.txt").read_text().splitlines()[8]
    assert "\tTSIG\t" in tsig
    out.write_text("\n".join([*text[:-2], tsig, *text[-2:]]))
    assert axfr_text_file_sum(out, "tld.") == expected


def test_zone_set_sums_equal_each_file_and_are_cached_until_one_changes(
    tmp_path: Path, digest: str
) -> None:
    spec = ZoneSpec(preset="hosting", records=12, origin="set.example.", zones=40)
    files = [(f.path, f.origin) for f in generate(spec, cache_dir=tmp_path / "zones").files]
    cache = tmp_path / "rrsums.json"
    sums = zone_set_sums(files, cache_file=cache)
    assert sums == {origin: zone_file_sum(path, origin, cache=False) for path, origin in files}
    assert zone_set_sums(files, cache_file=cache) == sums and cache.exists()
    # A changed file is read again, not taken from the cache.
    path, origin = files[3]
    text = path.read_text().splitlines()
    path.write_text("\n".join(text[:-1]) + "\n")
    again = zone_set_sums(files, cache_file=cache)
    assert again[origin] != sums[origin] and again[origin].records == sums[origin].records - 1
    assert {o: s for o, s in again.items() if o != origin} == {
        o: s for o, s in sums.items() if o != origin
    }


def _rewrite_same_size(path: Path) -> None:
    """Change one address (same length) and put the old mtime back: a rewrite within the
    file system's timestamp granularity, as the size and mtime see it."""
    before = path.stat()
    text = path.read_bytes()
    at = text.index(b"192.0.2.")
    digit = text[at + 8 : at + 9]
    path.write_bytes(text[: at + 8] + (b"7" if digit != b"7" else b"8") + text[at + 9 :])
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert path.stat().st_mtime_ns == before.st_mtime_ns


def _cached_size_zone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A zone file large enough (INLINE_BYTES lowered) for its sum to be cached."""
    path = tmp_path / "hosts.zone"
    path.write_text("".join(f"h{i}.example. 300 IN A 192.0.2.{i % 250}\n" for i in range(3000)))
    monkeypatch.setattr("harness.xfr.zonefile_sum.INLINE_BYTES", 1000)
    return path


def test_zone_file_sum_cache_misses_a_same_size_rewrite_with_the_old_mtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _cached_size_zone(tmp_path, monkeypatch)
    first = zone_file_sum(path, "example.", workers=0)
    assert path.with_name(path.name + ".rrsum").exists()
    time.sleep(0.02)  # past the clock tick of the first write: the rewrite's ctime differs
    _rewrite_same_size(path)
    assert zone_file_sum(path, "example.", workers=0) != first
    assert zone_file_sum(path, "example.", workers=0) == zone_file_sum(
        path, "example.", cache=False
    )


def test_zone_file_sum_keeps_no_cache_for_a_file_changed_while_it_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, digest: str
) -> None:
    import harness.xfr.zonefile_sum as module

    path = _cached_size_zone(tmp_path, monkeypatch)
    name = "_sum_file_native" if digest == "rust" else "_sum_file_inline"
    summing = getattr(module, name)

    def rewritten_meanwhile(*args: Any) -> ZoneSum:
        value = summing(*args)
        path.write_text(path.read_text().replace("192.0.2.1\n", "192.0.2.9\n"))  # same size
        return value

    monkeypatch.setattr(module, name, rewritten_meanwhile)
    stale = zone_file_sum(path, "example.", workers=0)
    monkeypatch.setattr(module, name, summing)
    fresh = zone_file_sum(path, "example.", cache=False)
    assert fresh != stale
    assert zone_file_sum(path, "example.", workers=0) == fresh


def test_zone_set_sums_cache_misses_a_same_size_rewrite_with_the_old_mtime(
    tmp_path: Path,
) -> None:
    lines = [f"h{i}.example. 300 IN A 192.0.2.{i}\n" for i in range(20)]
    files = []
    for n in range(3):
        path = tmp_path / f"z{n}.zone"
        path.write_text("".join(lines).replace("example.", f"z{n}.example."))
        files.append((path, f"z{n}.example."))
    cache = tmp_path / "rrsums.json"
    sums = zone_set_sums(files, cache_file=cache)
    time.sleep(0.02)  # past the clock tick of the first write: the rewrite's ctime differs
    _rewrite_same_size(files[1][0])
    again = zone_set_sums(files, cache_file=cache)
    assert again[files[1][1]] != sums[files[1][1]]
    assert again[files[1][1]] == zone_file_sum(*files[1], cache=False)
