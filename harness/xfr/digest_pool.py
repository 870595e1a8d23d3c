"""Digest worker processes and the pool that feeds them, shared by the digest of a transfer
stream (``verify.StreamDigester``) and of a zone file (``zonefile_sum``).

Work items reach the workers through one shared pipe, 24 bytes each (start, end, flags):
writes of up to PIPE_BUF bytes are atomic and every worker reads exactly 24 bytes, so an
idle worker takes the next item (no worker waits while another has a backlog). The
writer's end is non-blocking: items wait in a local queue when the pipe is full. Each
worker reads its ranges of the shared file with ``pread`` and prints a partial sum; sums
add up. Workers are ``python -m harness.xfr.digest_pool``: plain subprocesses started by
pid, ended by pid, with no fork of a driver that has threads, at a lower priority
(``WORKER_NICE``) so that the servers and the reader win the CPU.
"""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import harness
from harness.core.errors import XfrbenchError
from harness.xfr.rrsum import ZoneSum, sum_stream
from harness.xfr.rrsum_text import LineError, LineSummer
from harness.xfr.wire import WireError

INLINE_BYTES = 2 << 20  # below this a stream or file is digested in the driver
WORKER_NICE = 10
DEFAULT_WORKERS = max(1, min(4, os.cpu_count() or 1))
ITEM = struct.Struct("<QQQ")  # start, end, flags
FLAG_DROP_LAST = 1  # the range ends with the closing SOA of a transfer: not zone data
_PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux)


class DigestFailed(XfrbenchError):
    """A digest could not be computed: a malformed message or line, or a worker that died.
    The message says what, where (offset, line) and, for files, the fix."""


class DigestPool:
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
        argv = [sys.executable, "-m", "harness.xfr.digest_pool", mode, str(fd), str(nice), *args]
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
        self._backlog.append(ITEM.pack(start, end, flags))
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


class BadLine(Exception):
    def __init__(self, text: str, offset: int) -> None:
        super().__init__(text)
        self.offset = offset


OFFSET_TAG = " @offset "


def offset_of(text: str) -> int | None:
    if OFFSET_TAG not in text:
        return None
    try:
        return int(text.rsplit(OFFSET_TAG, 1)[1])
    except ValueError:
        return None


def strip_offset(text: str) -> str:
    return text.split(OFFSET_TAG, 1)[0]


def sum_range(summer: LineSummer, fd: int, start: int, end: int) -> None:
    """Add the lines of ``[start, end)`` to ``summer``; a bad line raises ``BadLine`` with
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
                raise BadLine(str(exc), offset) from None
            offset += len(line)
        raise


# --- worker processes ------------------------------------------------------------------------


def _read_item(fd: int) -> bytes:
    data = b""
    while len(data) < ITEM.size:
        part = os.read(fd, ITEM.size - len(data))
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
            start, end, flags = ITEM.unpack(item)
            if summer is not None:
                sum_range(summer, fd, start, end)
                continue
            data = os.pread(fd, end - start, start)
            if len(data) != end - start:
                raise DigestFailed(f"the spill file ends before offset {end}")
            try:
                total = total + sum_stream(data, drop_last=bool(flags & FLAG_DROP_LAST))
            except WireError as exc:
                raise DigestFailed(f"{exc} (in the chunk at stream offset {start})") from None
    except BadLine as exc:
        print(f"error {exc}{OFFSET_TAG}{exc.offset}", flush=True)
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
