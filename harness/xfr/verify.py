"""Verify a copy of a zone with one pull at full speed, and digest zone files and diffs: the
I/O around ``harness.xfr.rrsum`` (see there for what the digest is and why it is sound).

``verify_copy`` reads the zone by AXFR with the own reader (``pull``) and never lets the
digest slow the read: each message is appended to an unlinked temporary file (the spill)
and every ``CHUNK_BYTES`` of whole messages become one work item for digest worker
processes, which read the spill with ``pread`` and return partial sums that simply add up
(compression pointers never leave a message, so a run of whole messages is self-contained).
The driver keeps at most one chunk in memory whatever the zone's size; the spill lives in
the page cache and on disk, never in the driver's heap. Workers run at a lower priority
(``WORKER_NICE``) so that the server being read and the reader win the CPU; whatever they
have not done when the last message arrives they finish after it. Zones smaller than
``INLINE_BYTES`` are digested in the driver after the read, with no file and no process.

Work items reach the workers through one shared pipe, 24 bytes each (start, end, flags):
writes of up to PIPE_BUF bytes are atomic and every worker reads exactly 24 bytes, so an
idle worker takes the next item (no worker waits while another has a backlog). The
reader's end is non-blocking: items wait in a local queue when the pipe is full.

``zone_file_sum`` does the same over byte ranges of a zone file (cut at line ends), and
keeps the result beside the file (``<file>.rrsum``) keyed by size and mtime, so a zone is
read once. Workers are ``python -m harness.xfr.verify``: plain subprocesses started by pid,
ended by pid, with no fork of a driver that has threads.
"""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import harness
from harness.errors import UserInputError, XfrbenchError
from harness.xfr import PullResult
from harness.xfr.pull import pull, pull_many
from harness.xfr.rrsum import (
    SCHEME,
    LineError,
    LineSummer,
    ZoneSum,
    apply_diff_lines,
    diff_sums,
    is_rrsum_text,
    sum_lines,
    sum_stream,
)
from harness.xfr.wire import WireError

CHUNK_BYTES = 1 << 20  # one work item: ~35 k records of a TLD zone, ~50 ms of a worker
INLINE_BYTES = 2 << 20  # below this a stream or file is digested in the driver
TEXT_CHUNK_BYTES = 4 << 20
WORKER_NICE = 10
DEFAULT_WORKERS = max(1, min(4, os.cpu_count() or 1))
_ITEM = struct.Struct("<QQQ")  # start, end, flags
_FLAG_DROP_LAST = 1
_PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux)
CACHE_SUFFIX = ".rrsum"


class DigestFailed(XfrbenchError):
    """A digest could not be computed: a malformed message or line, or a worker that died.
    The message says what, where (offset, line) and, for files, the fix."""


# --- worker pool ---------------------------------------------------------------------------


class _Pool:
    """``count`` worker processes sharing one pipe of work items over the file ``fd``."""

    def __init__(self, count: int, fd: int, mode: str, args: list[str], nice: int) -> None:
        read_end, self._write_end = os.pipe()
        try:
            import fcntl

            fcntl.fcntl(self._write_end, _F_SETPIPE_SZ, _PIPE_SIZE)
        except OSError:
            pass  # the default 64 KiB holds 2,730 items; the local queue takes the rest
        os.set_blocking(self._write_end, False)
        env = dict(os.environ)
        root = str(Path(harness.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        # numpy only adds integer columns here: no BLAS threads spinning beside the worker.
        env["OPENBLAS_NUM_THREADS"] = "1"
        argv = [sys.executable, "-m", "harness.xfr.verify", mode, str(fd), str(nice), *args]
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            for _ in range(count):
                self.procs.append(
                    subprocess.Popen(
                        argv,
                        stdin=read_end,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        pass_fds=(fd,),
                        env=env,
                    )
                )
        except OSError:
            self.kill()
            raise
        finally:
            os.close(read_end)
        self._backlog: deque[bytes] = deque()
        self.items = 0
        self.peak_rss_kb = 0  # the largest worker's, reported by itself when done

    def submit(self, start: int, end: int, flags: int = 0) -> None:
        self._backlog.append(_ITEM.pack(start, end, flags))
        self.items += 1
        self.flush()

    def flush(self) -> None:
        """Hand queued items to the pipe without ever blocking."""
        while self._backlog:
            try:
                os.write(self._write_end, self._backlog[0])
            except BlockingIOError:
                return
            except BrokenPipeError:
                # Every worker has exited; results() reports why. The read goes on.
                self._backlog.clear()
                return
            self._backlog.popleft()

    def results(self, deadline: float) -> ZoneSum:
        """Close the pipe (workers stop at its end) and add up what every worker found."""
        os.set_blocking(self._write_end, True)
        try:
            while self._backlog:
                os.write(self._write_end, self._backlog.popleft())
        except BrokenPipeError:
            pass  # every worker has exited; their output says why
        finally:
            os.close(self._write_end)
            self._write_end = -1
        total = ZoneSum()
        errors: list[str] = []
        for proc in self.procs:
            try:
                out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                raise DigestFailed(
                    f"digest workers did not finish in time ({self.items} chunks); "
                    "raise the timeout or use more workers"
                ) from None
            text = out.decode(errors="replace").strip()
            if proc.returncode == 0 and text.startswith("ok "):
                _, records, hexsum, rss_kb = text.split()
                total = total + ZoneSum(int(hexsum, 16), int(records))
                self.peak_rss_kb = max(self.peak_rss_kb, int(rss_kb))
            elif text.startswith("error "):
                errors.append(text[len("error ") :])
            else:
                tail = err.decode(errors="replace").strip().splitlines()[-3:]
                errors.append(
                    f"digest worker pid {proc.pid} exited with {proc.returncode}: "
                    + (" | ".join(tail) or "no output")
                )
        if errors:
            raise DigestFailed(errors[0])
        return total

    def kill(self) -> None:
        if getattr(self, "_write_end", -1) >= 0:
            os.close(self._write_end)
            self._write_end = -1
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


# --- a transfer stream -----------------------------------------------------------------------


class StreamDigester:
    """Takes the messages of an AXFR as the reader gets them (``message``) and returns the
    zone's sum (``finish``): all answer records but the closing SOA.

    ``workers``: digest processes (0: digest in the driver after the read, from the spill).
    ``concurrent``: start them during the read (False: after it, so that a timed read shares
    the CPU with nothing).
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
        self._pool: _Pool | None = None
        self._chunks: list[tuple[int, int, int]] = []  # items not yet given to a pool
        self._ended = False
        self._error: str | None = None
        self.stream_bytes = 0

    def message(self, msg: bytes, last: bool) -> None:
        """One message as it completes (``last``: it holds the closing SOA). Never blocks on
        the digest: at worst it writes a chunk to the page cache."""
        if self._ended:
            raise ValueError("a message after the last one")
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
            self._cut(_FLAG_DROP_LAST if last else 0)

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
                self._pool = _Pool(self.workers, self._file.fileno(), "stream", [], self.nice)
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
        try:
            if self._file is None:
                return sum_stream(self._pending, drop_last=True)
            if self._pool is None and self.workers > 0 and len(self._chunks) > 1:
                self._pool = _Pool(self.workers, self._file.fileno(), "stream", [], self.nice)
                for item in self._chunks:
                    self._pool.submit(*item)
                self._chunks.clear()
            if self._pool is not None:
                return self._pool.results(deadline)
            total = ZoneSum()
            for start, end, flags in self._chunks:
                data = os.pread(self._file.fileno(), end - start, start)
                total = total + sum_stream(data, drop_last=bool(flags & _FLAG_DROP_LAST))
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
    ``digest_after_s`` (last message to digest done), ``digest_workers``,
    ``digest_worker_rss_kb`` (the largest worker's peak RSS), ``spilled_bytes``. A
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
    server: str, zones: list[str], *, netns: str | None, timeout: float = 60.0
) -> dict[str, PullResult]:
    """`verify_copy` for many small zones over one connection (`pull.pull_many`): each
    result carries its RRSUM in `digest` and the zone's records in extra.zone_records."""
    out: dict[str, PullResult] = {}
    for zone, result, stream in pull_many(server, zones, netns=netns, timeout=timeout):
        if result.ok:
            try:
                total = sum_stream(stream, drop_last=True)
            except (ValueError, WireError) as exc:
                result.ok = False
                result.error = f"verifying the copy of {zone} from {server}: {exc}"
            else:
                result.digest = total.text
                result.extra["zone_records"] = total.records
        out[zone] = result
    return out


# --- zone files and diffs --------------------------------------------------------------------


def _line_ranges(fd: int, size: int, chunk: int) -> Iterator[tuple[int, int]]:
    """Byte ranges of about ``chunk`` bytes covering the file, each ending after a newline
    (the last one at the end of the file)."""
    start = 0
    while start < size:
        cut = start + chunk
        if cut >= size:
            yield start, size
            return
        while True:
            probe = os.pread(fd, 65536, cut)
            nl = probe.find(b"\n")
            if nl >= 0:
                cut += nl + 1
                break
            if not probe:
                cut = size
                break
            cut += len(probe)
        yield start, cut
        start = cut


def _cache_path(path: Path) -> Path:
    return path.with_name(path.name + CACHE_SUFFIX)


def _cache_key(path: Path, origin: str) -> dict[str, Any]:
    st = path.stat()
    return {
        "scheme": SCHEME,
        "origin": origin.lower(),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
    }


def _read_cache(path: Path, origin: str) -> ZoneSum | None:
    try:
        data = json.loads(_cache_path(path).read_text())
        if {k: data.get(k) for k in ("scheme", "origin", "size", "mtime_ns")} != _cache_key(
            path, origin
        ):
            return None
        return ZoneSum.from_text(data["sum"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(path: Path, origin: str, value: ZoneSum) -> None:
    target = _cache_path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps({**_cache_key(path, origin), "sum": value.text}) + "\n")
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)  # a read-only place: computing again next time is fine


def _line_number(path: Path, offset: int) -> int:
    with open(path, "rb") as fh:
        return fh.read(offset).count(b"\n") + 1


def zone_file_sum(
    path: Path | str,
    origin: str,
    *,
    workers: int = DEFAULT_WORKERS,
    cache: bool = True,
    timeout: float = 3600.0,
) -> ZoneSum:
    """The RRSUM of a zone file with one RR per line (zonegen, ``dnssec-signzone -O full``,
    ``named-compilezone -s full``), read in ranges by ``workers`` processes (in the driver
    for small files), in bounded memory. With ``cache`` the result for a file over
    ``INLINE_BYTES`` is kept in ``<file>.rrsum`` and reused while the file's size and mtime
    are unchanged."""
    path = Path(path)
    size = path.stat().st_size
    cache = cache and size > INLINE_BYTES  # a small zone costs less to read than its cache
    if cache and (hit := _read_cache(path, origin)) is not None:
        return hit
    fix = (
        "write the zone one RR per line with absolute names, e.g. "
        f"`named-compilezone -s full -o out.zone {origin} {path.name}`"
    )
    with open(path, "rb") as fh:
        fd = fh.fileno()
        try:
            if workers <= 0 or size <= INLINE_BYTES:
                value = _sum_file_inline(fd, size, origin)
            else:
                pool = _Pool(workers, fd, "zone", [origin], WORKER_NICE)
                try:
                    for start, end in _line_ranges(fd, size, TEXT_CHUNK_BYTES):
                        pool.submit(start, end)
                    value = pool.results(time.monotonic() + timeout)
                finally:
                    pool.kill()
        except (DigestFailed, _BadLine) as exc:
            offset = exc.offset if isinstance(exc, _BadLine) else _offset_of(str(exc))
            where = f"{path}:{_line_number(path, offset)}" if offset is not None else str(path)
            raise UserInputError(_strip_offset(str(exc)), file=where, fix=fix) from None
    if cache:
        _write_cache(path, origin, value)
    return value


class _BadLine(Exception):
    def __init__(self, text: str, offset: int) -> None:
        super().__init__(text)
        self.offset = offset


_OFFSET_TAG = " @offset "


def _offset_of(text: str) -> int | None:
    if _OFFSET_TAG not in text:
        return None
    try:
        return int(text.rsplit(_OFFSET_TAG, 1)[1])
    except ValueError:
        return None


def _strip_offset(text: str) -> str:
    return text.split(_OFFSET_TAG, 1)[0]


def _sum_range(summer: LineSummer, fd: int, start: int, end: int) -> None:
    """Add the lines of ``[start, end)`` to ``summer``; a bad line raises ``_BadLine`` with
    its byte offset (found by a second, line-by-line pass: only on failure)."""
    data = os.pread(fd, end - start, start)
    try:
        summer.add_lines(data.splitlines())
    except LineError:
        offset = start
        for line in data.splitlines(keepends=True):
            try:
                LineSummer(summer.origin.to_text()).add_lines([line])
            except LineError as exc:
                raise _BadLine(str(exc), offset) from None
            offset += len(line)
        raise


def _sum_file_inline(fd: int, size: int, origin: str) -> ZoneSum:
    summer = LineSummer(origin)
    for start, end in _line_ranges(fd, size, TEXT_CHUNK_BYTES):
        _sum_range(summer, fd, start, end)
    return summer.result()


def diff_file_sums(path: Path | str, origin: str) -> tuple[ZoneSum, ZoneSum]:
    """(deleted, added) sums of a zonegen change-set diff (``ChangeSet.diff_path``)."""
    with open(path, "rb") as fh:
        try:
            return diff_sums(fh, origin)
        except LineError as exc:
            raise UserInputError(str(exc), file=path, fix="use a zonegen change set diff") from None


def apply_diff_file(base: ZoneSum, path: Path | str, origin: str) -> ZoneSum:
    """The primary's sum after the change set in ``path``: ``base - deleted + added``."""
    with open(path, "rb") as fh:
        try:
            return apply_diff_lines(base, fh, origin)
        except LineError as exc:
            raise UserInputError(str(exc), file=path, fix="use a zonegen change set diff") from None


def _is_tsig_line(line: bytes) -> bool:
    """kdig prints the TSIG of a signed transfer as an RR line; it is not zone data."""
    fields = line.split(None, 4)
    return len(fields) >= 4 and b"TSIG" in (fields[2].upper(), fields[3].upper())


def axfr_text_file_sum(path: Path | str, origin: str) -> ZoneSum:
    """The sum of a zone printed as an AXFR, one RR per line (kdig's output): every record
    but the last one, the closing SOA; comment lines (``;;``) are skipped. Streams."""
    last: list[bytes] = []

    def records(fh: BinaryIO) -> Iterator[bytes]:
        for line in fh:
            stripped = line.strip()
            if stripped and not stripped.startswith(b";") and not _is_tsig_line(stripped):
                last[:] = [line]
                yield line

    summer = LineSummer(origin)
    with open(path, "rb") as fh:
        try:
            summer.add_lines(records(fh))
            if not last:
                return ZoneSum()
            return summer.result() - sum_lines(last, origin)
        except LineError as exc:
            raise DigestFailed(f"{path}: {exc}") from None


# --- worker processes ------------------------------------------------------------------------


def _read_item(fd: int) -> bytes:
    data = b""
    while len(data) < _ITEM.size:
        part = os.read(fd, _ITEM.size - len(data))
        if not part:
            if data:
                raise DigestFailed("a truncated work item on the pipe")
            return b""
        data += part
    return data


def _worker(argv: list[str]) -> int:
    mode, fd_text, nice_text, *rest = argv
    fd = int(fd_text)
    os.nice(int(nice_text))
    total = ZoneSum()
    summer = LineSummer(rest[0]) if mode == "zone" else None
    try:
        while item := _read_item(0):
            start, end, flags = _ITEM.unpack(item)
            if summer is not None:
                _sum_range(summer, fd, start, end)
                continue
            data = os.pread(fd, end - start, start)
            if len(data) != end - start:
                raise DigestFailed(f"the spill file ends before offset {end}")
            try:
                total = total + sum_stream(data, drop_last=bool(flags & _FLAG_DROP_LAST))
            except WireError as exc:
                raise DigestFailed(f"{exc} (in the chunk at stream offset {start})") from None
    except _BadLine as exc:
        print(f"error {exc}{_OFFSET_TAG}{exc.offset}", flush=True)
        return 1
    except DigestFailed as exc:
        print(f"error {exc}", flush=True)
        return 1
    if summer is not None:
        total = summer.result()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"ok {total.records} {total.hex} {peak_kb}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
