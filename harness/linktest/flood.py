"""A paced UDP flood with sequence numbers, to count loss on each direction of a link.

    python -m harness.linktest.flood recv --bind ADDR --port P [--idle S] [--max-wait S]
    python -m harness.linktest.flood send --to ADDR --port P --count N --pps R [--size B]

The receiver prints "ready" once bound, then one JSON line when the flow has gone quiet:
unique packets, duplicates and reordered arrivals. The sender prints one JSON line with what
it handed to the kernel. Loss = 1 - unique received / sent: duplicates never hide a loss.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

HEADER = struct.Struct("!QQ")  # flow id, sequence number


def receive(bind: str, port: int, idle: float, max_wait: float) -> dict[str, int | float]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((bind, port))
    print("ready", flush=True)
    seen = bytearray()
    unique = duplicates = reordered = 0
    highest = -1
    first = last = 0.0
    start = time.monotonic()
    sock.settimeout(0.05)
    while True:
        now = time.monotonic()
        if (unique and now - last > idle) or now - start > max_wait:
            break
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        if len(data) < HEADER.size:
            continue
        _, seq = HEADER.unpack_from(data)
        last = time.monotonic()
        first = first or last
        if seq >= len(seen):
            seen.extend(b"\0" * (seq + 1 - len(seen) + 4096))
        if seen[seq]:
            duplicates += 1
            continue
        seen[seq] = 1
        unique += 1
        if seq < highest:
            reordered += 1
        highest = max(highest, seq)
    return {
        "received": unique,
        "duplicates": duplicates,
        "reordered": reordered,
        "highest_seq": highest,
        "duration_s": round(last - first, 6),
    }


def send(to: str, port: int, count: int, pps: float, size: int) -> dict[str, int | float]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.connect((to, port))
    padding = b"\0" * max(0, size - HEADER.size)
    sent = errors = 0
    start = time.monotonic()
    # Paced in 1 ms slots: a burst bigger than the queues would add drops nobody configured.
    for seq in range(count):
        due = start + seq / pps
        delay = due - time.monotonic()
        if delay > 0.001:
            time.sleep(delay)
        try:
            sock.send(HEADER.pack(1, seq) + padding)
            sent += 1
        except OSError:
            errors += 1
    return {"sent": sent, "send_errors": errors, "duration_s": round(time.monotonic() - start, 6)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.linktest.flood")
    sub = parser.add_subparsers(dest="mode", required=True)
    recv = sub.add_parser("recv")
    recv.add_argument("--bind", required=True)
    recv.add_argument("--port", type=int, required=True)
    recv.add_argument("--idle", type=float, default=1.0)
    recv.add_argument("--max-wait", type=float, default=120.0)
    snd = sub.add_parser("send")
    snd.add_argument("--to", required=True)
    snd.add_argument("--port", type=int, required=True)
    snd.add_argument("--count", type=int, required=True)
    snd.add_argument("--pps", type=float, required=True)
    snd.add_argument("--size", type=int, default=64)
    args = parser.parse_args(argv)
    if args.mode == "recv":
        result = receive(args.bind, args.port, args.idle, args.max_wait)
    else:
        result = send(args.to, args.port, args.count, args.pps, args.size)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
