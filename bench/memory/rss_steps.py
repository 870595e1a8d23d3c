"""Run `xfrbench` with a thread that samples the driver's RSS every 0.25 s and, at every
10 MB step, writes where each thread was (the main thread's stack names the phase and the
module that grew it); with XFRBENCH_RSS_TRACEMALLOC=1, tracemalloc's top allocations at each
new 25 MB high too (slow, and it inflates what it measures: evidence, not the figure).

    flock /work/systest.lock .venv/bin/python bench/memory/rss_steps.py run SCENARIO

Writes XFRBENCH_RSS_LOG (default rss_steps.log); the figure to report is the run's own
"driver peak RSS" (its closing accounting), which the last line repeats (ru_maxrss).
docs/catalog.md shows what it found in a 100 k-member catalog run."""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
import traceback
import tracemalloc
from types import FrameType

STEP_KB = 10 * 1024
HIGH_STEP_KB = 25 * 1024


def rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def where(frame: FrameType, depth: int = 6) -> str:
    stack = traceback.extract_stack(frame)[-depth:]
    named = (f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in reversed(stack))
    return " < ".join(named)


def sample(log: object, traced: bool) -> None:
    began, last, high, traced_high = time.time(), 0, 0, 0
    main = threading.main_thread().ident
    while True:
        now = rss_kb()
        if abs(now - last) >= STEP_KB or now > high:
            frames = sys._current_frames()
            print(f"{time.time() - began:8.1f}s rss {now / 1024:7.1f} MiB", file=log, flush=True)
            if abs(now - last) >= STEP_KB:
                for ident, frame in frames.items():
                    if ident != threading.get_ident():
                        tag = "MAIN" if ident == main else f"t{ident % 10000}"
                        print(f"    {tag}: {where(frame)}", file=log, flush=True)
                last = now
            high = max(high, now)
        if traced and now > traced_high + HIGH_STEP_KB:
            traced_high = now
            for stat in tracemalloc.take_snapshot().statistics("traceback")[:8]:
                print(f"    {stat.size / 2**20:7.1f} MiB {stat.count:8d} blocks", file=log)
                for line in stat.traceback.format()[-12:]:
                    print(f"        {line}", file=log, flush=True)
        time.sleep(0.25)


def main() -> int:
    traced = os.environ.get("XFRBENCH_RSS_TRACEMALLOC") == "1"
    log = open(os.environ.get("XFRBENCH_RSS_LOG", "rss_steps.log"), "w")  # noqa: SIM115
    if traced:
        tracemalloc.start(10)
    threading.Thread(target=sample, args=(log, traced), daemon=True).start()
    from harness.cli import main as xfrbench

    status = xfrbench(sys.argv[1:])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"END ru_maxrss {peak:.1f} MiB, exit {status}", file=log, flush=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
