"""The RRSUM of zone files, change-set diffs and kdig's AXFR text: the file I/O around
``harness.xfr.rrsum``.

``zone_file_sum`` digests byte ranges of a zone file (cut at line ends) with the compiled
summer in threads (``rrsum_native``; it releases the GIL), or with the Python reference in
digest workers (``digest_pool``), and keeps the result beside the file (``<file>.rrsum``),
so a zone is read once: it is the reference a secondary's copy is checked against, without
pulling the primary's copy.

A cached sum is keyed on the file's inode, size, mtime and ctime (``file_key``), taken
before the file is read, and stored only when the same four are found again after it was
read. Size and mtime alone miss a same-size rewrite within the file system's timestamp
granularity (and an mtime set back); ctime catches that (no one can set it), the inode a
replacement by rename, and the second look a file changed while it was being read.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from harness.core.errors import UserInputError
from harness.xfr.digest_pool import (
    DEFAULT_WORKERS,
    INLINE_BYTES,
    WORKER_NICE,
    BadLine,
    DigestFailed,
    DigestPool,
    offset_of,
    strip_offset,
    sum_range,
)
from harness.xfr.rrsum import SCHEME, ZoneSum
from harness.xfr.rrsum_native import native_module, sum_text
from harness.xfr.rrsum_text import (
    LineCaches,
    LineError,
    LineSummer,
    apply_diff_lines,
    diff_sums,
    sum_lines,
)

TEXT_CHUNK_BYTES = 4 << 20
CACHE_SUFFIX = ".rrsum"


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


def file_key(st: os.stat_result) -> list[int]:
    """What says a file is unchanged: inode, size, mtime and ctime (ns)."""
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _cache_key(origin: str, st: os.stat_result) -> dict[str, Any]:
    return {"scheme": SCHEME, "origin": origin.lower(), "file": file_key(st)}


def _read_cache(path: Path, origin: str, st: os.stat_result) -> ZoneSum | None:
    try:
        data = json.loads(_cache_path(path).read_text())
        if {k: data.get(k) for k in ("scheme", "origin", "file")} != _cache_key(origin, st):
            return None
        return ZoneSum.from_text(data["sum"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(path: Path, origin: str, value: ZoneSum, read: os.stat_result) -> None:
    """Keep `value` keyed on `read` (the file as it was before it was read), only if the
    file is still that file: one changed meanwhile keeps no sum."""
    target = _cache_path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        if file_key(path.stat()) != file_key(read):
            return
        tmp.write_text(json.dumps({**_cache_key(origin, read), "sum": value.text}) + "\n")
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
    ``named-compilezone -s full``), read in ranges by ``workers`` threads of the compiled
    summer, or processes of the Python reference (in the driver for small files), in
    bounded memory. With ``cache`` the result for a file over
    ``INLINE_BYTES`` is kept in ``<file>.rrsum`` and reused while the file is unchanged
    (``file_key``)."""
    path = Path(path)
    fix = (
        "write the zone one RR per line with absolute names, e.g. "
        f"`named-compilezone -s full -o out.zone {origin} {path.name}`"
    )
    with open(path, "rb") as fh:
        fd = fh.fileno()
        read = os.fstat(fd)  # before reading: what the sum will be of
        size = read.st_size
        cache = cache and size > INLINE_BYTES  # a small zone costs less to read than its cache
        if cache and (hit := _read_cache(path, origin, read)) is not None:
            return hit
        try:
            if native_module() is not None:
                value = _sum_file_native(fd, size, origin, workers if size > INLINE_BYTES else 1)
            elif workers <= 0 or size <= INLINE_BYTES:
                value = _sum_file_inline(fd, size, origin)
            else:
                pool = DigestPool(workers, fd, "zone", [origin], WORKER_NICE)
                try:
                    for start, end in _line_ranges(fd, size, TEXT_CHUNK_BYTES):
                        pool.submit(start, end)
                    value = pool.results(time.monotonic() + timeout)
                finally:
                    pool.kill()
        except (DigestFailed, BadLine) as exc:
            offset = exc.offset if isinstance(exc, BadLine) else offset_of(str(exc))
            where = f"{path}:{_line_number(path, offset)}" if offset is not None else str(path)
            raise UserInputError(strip_offset(str(exc)), file=where, fix=fix) from None
    if cache:
        _write_cache(path, origin, value, read)
    return value


def zone_set_sums(
    files: Sequence[tuple[Path, str]], *, cache_file: Path | None = None
) -> dict[str, ZoneSum]:
    """The RRSUM of each of many zone files, by origin: a hosting set of thousands of small
    zones, read with one summer's caches shared between them (heads and the providers' NS
    rdata repeat from zone to zone). With ``cache_file`` the sums are kept there, keyed by
    every file's ``file_key`` taken before reading, and reused while none changed (they
    are not kept when one changed while they were read). Large files go through
    ``zone_file_sum``."""
    stats = {origin: os.stat(path) for path, origin in files}
    key = {origin: file_key(st) for origin, st in stats.items()}
    if cache_file is not None:
        try:
            data = json.loads(cache_file.read_text())
            if data.get("scheme") == SCHEME and data.get("files") == key:
                return {origin: ZoneSum.from_text(text) for origin, text in data["sums"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # computed again below
    sums: dict[str, ZoneSum] = {}
    caches = LineCaches()
    native = native_module() is not None
    for path, origin in files:
        if stats[origin].st_size > INLINE_BYTES:
            sums[origin] = zone_file_sum(path, origin)
            continue
        if native:
            try:
                sums[origin] = sum_text(Path(path).read_bytes(), origin)
            except LineError:
                zone_file_sum(path, origin, cache=False)  # raises, naming the line
                raise
            continue
        summer = LineSummer(origin, caches)
        try:
            summer.add_lines(Path(path).read_bytes().splitlines())
        except LineError:
            zone_file_sum(path, origin, cache=False)  # raises, naming the line
            raise
        sums[origin] = summer.result()
    if cache_file is not None and _unchanged(files, key):
        tmp = cache_file.with_name(f".{cache_file.name}.tmp-{os.getpid()}")
        payload = {"scheme": SCHEME, "files": key, "sums": {o: v.text for o, v in sums.items()}}
        try:
            tmp.write_text(json.dumps(payload))
            os.replace(tmp, cache_file)
        except OSError:
            tmp.unlink(missing_ok=True)  # a read-only place: computed again next time
    return sums


def _unchanged(files: Sequence[tuple[Path, str]], key: dict[str, list[int]]) -> bool:
    try:
        return all(file_key(os.stat(path)) == key[origin] for path, origin in files)
    except OSError:
        return False


def _sum_file_native(fd: int, size: int, origin: str, threads: int) -> ZoneSum:
    """The compiled summer over ranges of the file, ``threads`` at a time."""

    def one(bounds: tuple[int, int]) -> ZoneSum:
        start, end = bounds
        try:
            return sum_text(os.pread(fd, end - start, start), origin)
        except LineError:
            sum_range(LineSummer(origin), fd, start, end)  # raises BadLine with the offset
            raise

    total = ZoneSum()
    ranges = list(_line_ranges(fd, size, TEXT_CHUNK_BYTES))
    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="xfrbench-zonesum") as pool:
        for part in pool.map(one, ranges):
            total = total + part
    return total


def _sum_file_inline(fd: int, size: int, origin: str) -> ZoneSum:
    summer = LineSummer(origin)
    for start, end in _line_ranges(fd, size, TEXT_CHUNK_BYTES):
        sum_range(summer, fd, start, end)
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


def _is_record_line(line: bytes) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(b";") and not _is_tsig_line(stripped)


def _last_record_line(data: bytes) -> bytes | None:
    """The last record line of ``data`` (a kdig output's tail is a few comment lines)."""
    for tail in (data[-65536:], data):
        for line in reversed(tail.splitlines()):
            if _is_record_line(line):
                return line
    return None


def axfr_text_file_sum(path: Path | str, origin: str) -> ZoneSum:
    """The sum of a zone printed as an AXFR, one RR per line (kdig's output): every record
    but the last one, the closing SOA; comment lines (``;;``) are skipped. Streams."""
    if native_module() is not None:
        return _axfr_text_file_sum_native(Path(path), origin)
    last: list[bytes] = []

    def records(fh: BinaryIO) -> Iterator[bytes]:
        for line in fh:
            if _is_record_line(line):
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


def _axfr_text_file_sum_native(path: Path, origin: str) -> ZoneSum:
    total = ZoneSum()
    last: bytes | None = None
    with open(path, "rb") as fh:
        fd = fh.fileno()
        try:
            for start, end in _line_ranges(fd, os.fstat(fd).st_size, TEXT_CHUNK_BYTES):
                data = os.pread(fd, end - start, start)
                total = total + sum_text(data, origin, skip=_is_tsig_line)
                last = _last_record_line(data) or last
            if last is None:
                return ZoneSum()
            return total - sum_lines([last], origin)
        except LineError as exc:
            raise DigestFailed(f"{path}: {exc}") from None
