"""Verify a copy of a zone with one pull at full speed: the socket I/O around
``harness.xfr.rrsum`` (see there for what the digest is and why it is sound).

``verify_copy`` reads the zone by AXFR with the own reader (``pull``). With the compiled
digest (``rrsum_native``, the normal case) each message is summed as it arrives, in the
reader, at about 0.1 us a record: a few per cent of what the server takes to send it, so
the sum is done when the last message is, with no file, no process and no copy of the
zone kept. With the Python reference (the extension missing, or ``XFRBENCH_RRSUM=python``)
the digest must never slow the read, so each message is appended to an unlinked temporary
file (the spill) and every ``CHUNK_BYTES`` of whole messages become one work item for
digest worker processes (``digest_pool``), which read the spill with ``pread`` and return
partial sums that simply add up (compression pointers never leave a message, so a run of
whole messages is self-contained). The driver keeps at most one chunk in memory whatever the
zone's size; the spill lives in the page cache and on disk, never in the driver's heap.
Whatever the workers have not done when the last message arrives they finish after it.
Zones smaller than ``INLINE_BYTES`` are digested in the driver after the read, with no
file and no process. ``verify_many`` reads many small zones over one connection.

The reference a copy is checked against (``check_copy``) is the zone file's sum
(``zonefile_sum``), kept current with each change set.
"""

from __future__ import annotations

import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from harness.xfr import PullResult
from harness.xfr.digest_pool import (
    DEFAULT_WORKERS,
    FLAG_DROP_LAST,
    INLINE_BYTES,
    WORKER_NICE,
    DigestFailed,
    DigestPool,
)
from harness.xfr.pull import pull, pull_many
from harness.xfr.rrsum import ZoneSum, is_rrsum_text
from harness.xfr.rrsum_native import StreamSummer, native_module, sum_stream
from harness.xfr.wire import WireError

CHUNK_BYTES = 1 << 20  # one work item: ~35 k records of a TLD zone, ~50 ms of a worker
MANY_CONNECTIONS = 4  # verify_many's connections side by side


class StreamDigester:
    """Takes the messages of an AXFR as the reader gets them (``message``) and returns the
    zone's sum (``finish``): all answer records but the closing SOA.

    With the compiled digest every message is summed as it arrives (``inline``); the
    options below are for the Python reference. ``workers``: digest processes (0: digest in
    the driver after the read, from the spill). ``concurrent``: start them during the read
    (False: after it, so that a timed read shares the CPU with nothing).
    """

    def __init__(
        self,
        *,
        workers: int = DEFAULT_WORKERS,
        concurrent: bool = True,
        spill_dir: str | Path | None = None,
        nice: int = WORKER_NICE,
        chunk_bytes: int | None = None,
        inline_bytes: int | None = None,
    ) -> None:
        self.workers = workers
        self.concurrent = concurrent
        self.spill_dir = spill_dir
        self.nice = nice
        self.chunk_bytes = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        self.inline_bytes = INLINE_BYTES if inline_bytes is None else inline_bytes
        self._pending = bytearray()
        self._file: BinaryIO | None = None
        self._written = 0  # bytes of the spill file handed out or waiting in _pending
        self._chunk_start = 0
        self._pool: DigestPool | None = None
        self._chunks: list[tuple[int, int, int]] = []  # items not yet given to a pool
        self._ended = False
        self._error: str | None = None
        self.stream_bytes = 0
        # The compiled digest keeps up with any reader: sum each message as it comes.
        self._inline = StreamSummer() if native_module() is not None else None
        self.implementation = "python" if self._inline is None else "rust"

    def message(self, msg: bytes, last: bool) -> None:
        """One message as it completes (``last``: it holds the closing SOA). Never blocks on
        the digest: at worst it writes a chunk to the page cache."""
        if self._ended:
            raise ValueError("a message after the last one")
        if self._inline is not None:
            self.stream_bytes += len(msg) + 2
            self._ended = last
            if self._error is None:
                try:
                    self._inline.message(msg, drop_last=last)
                except WireError as exc:
                    self._fail(f"malformed message in the transfer: {exc}")
            return
        self._pending += len(msg).to_bytes(2, "big")
        self._pending += msg
        self.stream_bytes += len(msg) + 2
        self._ended = last
        if self._error is not None:
            self._pending.clear()
            return
        if self._file is None:
            if len(self._pending) < self.inline_bytes:
                return  # small so far: kept in memory, digested at the end if it stays so
            try:
                # Closed in close(); anonymous, so nothing is left behind if the driver dies.
                self._file = tempfile.TemporaryFile(  # noqa: SIM115
                    dir=self.spill_dir, prefix="xfrbench-spill-"
                )
            except OSError as exc:
                self._fail(f"cannot create the spill file in {self.spill_dir or '$TMPDIR'}: {exc}")
                return
        if len(self._pending) >= self.chunk_bytes or last:
            self._cut(FLAG_DROP_LAST if last else 0)

    def _fail(self, text: str) -> None:
        # Keep reading (the transfer is still measured); finish() reports the problem.
        self._error = text
        self._pending.clear()

    def _cut(self, flags: int) -> None:
        assert self._file is not None
        try:
            view = memoryview(self._pending)
            while view:
                view = view[os.write(self._file.fileno(), view) :]
            view.release()
        except OSError as exc:
            self._fail(f"writing the spill file failed: {exc}; free space or set spill_dir")
            return
        start = self._chunk_start
        end = start + len(self._pending)
        self._pending.clear()
        self._chunk_start = end
        self._chunks.append((start, end, flags))
        if self.concurrent and self.workers > 0 and self._pool is None:
            try:
                self._pool = DigestPool(self.workers, self._file.fileno(), "stream", [], self.nice)
            except OSError as exc:
                self._fail(f"cannot start digest workers: {exc}")
                return
        if self._pool is not None:
            for item in self._chunks:
                self._pool.submit(*item)
            self._chunks.clear()

    @property
    def spilled_bytes(self) -> int:
        return self._chunk_start

    @property
    def worker_peak_rss_kb(self) -> int:
        return self._pool.peak_rss_kb if self._pool is not None else 0

    @property
    def worker_pids(self) -> list[int]:
        return [p.pid for p in self._pool.procs] if self._pool is not None else []

    def finish(self, timeout: float = 600.0) -> ZoneSum:
        """The zone's sum; raises ``DigestFailed`` on a malformed message or a worker failure."""
        if not self._ended:
            raise ValueError("finish() before the last message")
        deadline = time.monotonic() + timeout
        if self._error is not None:
            raise DigestFailed(self._error)
        if self._inline is not None:
            return self._inline.result()
        try:
            if self._file is None:
                return sum_stream(self._pending, drop_last=True)
            if self._pool is None and self.workers > 0 and len(self._chunks) > 1:
                self._pool = DigestPool(self.workers, self._file.fileno(), "stream", [], self.nice)
                for item in self._chunks:
                    self._pool.submit(*item)
                self._chunks.clear()
            if self._pool is not None:
                return self._pool.results(deadline)
            total = ZoneSum()
            for start, end, flags in self._chunks:
                data = os.pread(self._file.fileno(), end - start, start)
                total = total + sum_stream(data, drop_last=bool(flags & FLAG_DROP_LAST))
            return total
        except WireError as exc:
            raise DigestFailed(f"malformed message in the transfer: {exc}") from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.kill()
            self._pool = None
        if self._file is not None:
            self._file.close()
            self._file = None
        self._pending = bytearray()


def verify_copy(
    server: str,
    zone: str,
    *,
    workers: int = DEFAULT_WORKERS,
    concurrent: bool = True,
    spill_dir: str | Path | None = None,
    nice: int = WORKER_NICE,
    timeout: float = 60.0,
    digest_timeout: float | None = None,
    **options: Any,
) -> PullResult:
    """A full copy of ``zone`` read once by AXFR at full speed, with its RRSUM.

    ``options`` go to ``pull`` (port, netns, tsig, tls, tls_hostname). The result is the
    pull's ``PullResult`` (``duration_s`` is the transfer's, not the digest's) with
    ``digest`` = ``ZoneSum.text`` and in ``extra``: ``zone_records`` (the zone's records:
    the AXFR's minus the closing SOA), ``verify_s`` (connect to digest done),
    ``digest_after_s`` (last message to digest done), ``digest_implementation`` (rust or
    python: ``rrsum_native``), ``digest_workers``, ``digest_worker_rss_kb`` (the largest
    worker's peak RSS), ``spilled_bytes`` (the last three 0 with the compiled digest). A
    malformed record, found by the digest though the reader's fast path skipped it, fails
    the result (``ok=False``) like a failed transfer.
    """
    digester = StreamDigester(
        workers=workers, concurrent=concurrent, spill_dir=spill_dir, nice=nice
    )
    t0 = time.monotonic()
    try:
        result = pull(
            server, zone, xfr="axfr", timeout=timeout, on_message=digester.message, **options
        )
        if not result.ok:
            return result
        t_read = time.monotonic()
        try:
            total = digester.finish(timeout if digest_timeout is None else digest_timeout)
        except DigestFailed as exc:
            result.ok = False
            result.error = f"verifying the copy from {server}: {exc}"
            return result
        t_done = time.monotonic()
        result.digest = total.text
        result.extra.update(
            zone_records=total.records,
            verify_s=t_done - t0,
            digest_after_s=t_done - t_read,
            digest_implementation=digester.implementation,
            digest_workers=len(digester.worker_pids),
            digest_worker_rss_kb=digester.worker_peak_rss_kb,
            spilled_bytes=digester.spilled_bytes,
        )
        return result
    finally:
        digester.close()


def check_copy(reference: ZoneSum, copy: PullResult, serial: int | None = None) -> str | None:
    """None when ``copy`` (from ``verify_copy``) holds exactly the records ``reference``
    sums (the primary's zone: ``zone_file_sum``, or a ``verify_copy`` of the primary, kept
    up to date with ``ZoneSum.apply``/``soa_bump``); else the first reason it does not."""
    if not copy.ok:
        return f"the copy could not be read: {copy.error}"
    if serial is not None and copy.serial != serial:
        return f"serial differs: expected {serial}, the copy has {copy.serial}"
    if copy.digest is None or not is_rrsum_text(copy.digest):
        return "the copy has no RRSUM digest; read it with verify_copy"
    got = ZoneSum.from_text(copy.digest)
    if got == reference:
        return None
    return (
        f"RRSUM differs: expected {reference.records} records (sum {reference.hex[:16]}…), "
        f"the copy has {got.records} (sum {got.hex[:16]}…)"
    )


def verify_many(
    server: str,
    zones: list[str],
    *,
    netns: str | None,
    timeout: float = 60.0,
    connections: int = MANY_CONNECTIONS,
) -> dict[str, PullResult]:
    """`verify_copy` for many small zones (`pull.pull_many`): each result carries its RRSUM
    in `digest` and the zone's records in extra.zone_records. The zones are shared among a
    few connections read side by side, each carrying its share's transfers one after
    another: a small zone's transfer is mostly waiting for the server's answer, and a
    few connections (not one per zone) leave no TIME_WAIT ports to speak of."""
    shares = [zones[i::connections] for i in range(max(1, connections)) if zones[i::connections]]

    def read(share: list[str]) -> dict[str, PullResult]:
        got: dict[str, PullResult] = {}
        for zone, result, stream in pull_many(server, share, netns=netns, timeout=timeout):
            if result.ok:
                try:
                    total = sum_stream(stream, drop_last=True)
                except (ValueError, WireError) as exc:
                    result.ok = False
                    result.error = f"verifying the copy of {zone} from {server}: {exc}"
                else:
                    result.digest = total.text
                    result.extra["zone_records"] = total.records
            got[zone] = result
        return got

    with ThreadPoolExecutor(len(shares), thread_name_prefix="xfrbench-verify") as pool:
        found: dict[str, PullResult] = {}
        for part in pool.map(read, shares):
            found.update(part)
    return {zone: found[zone] for zone in zones}
