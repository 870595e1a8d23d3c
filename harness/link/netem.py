"""tc command lines for a link direction: htb for the rate, netem for the impairments.

Pure functions: they build argv lists and run nothing. The testbed runs them inside the router
namespace, on the router's egress towards the receiving host, so the endpoints' own stacks see
an ordinary link. Units are explicit everywhere (bit/s, microseconds, percent) so tc's own
unit guessing never comes into play ('mbps' means bytes to tc).
"""

from __future__ import annotations

import math
import re
from typing import Any

from harness.spec import DirectionSpec, LossSpec

# A rate-less link is sized for this ceiling: faster than anything a veth pair carries here.
CEILING_BPS = 10_000_000_000
QUEUE_MIN_PACKETS = 1_000
# 200k full-size packets is ~300 MB: enough for 2 BDP at 4 Gbit/s and 300 ms RTT.
QUEUE_MAX_PACKETS = 200_000
ETHERNET_HEADER = 14  # qdiscs on a veth see the frame with its Ethernet header


def percent(value: float) -> str:
    """tc's percent syntax without exponents: 0.00001 -> '0.00001%'."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return f"{text or '0'}%"


def micros(seconds: float) -> str:
    return f"{round(seconds * 1e6)}us"


def queue_packets(
    rate_bps: int | None,
    rtt_s: float,
    mtu: int,
    *,
    factor: float = 2.0,
    ceiling_bps: int = CEILING_BPS,
    minimum: int = QUEUE_MIN_PACKETS,
    cap: int = QUEUE_MAX_PACKETS,
) -> int:
    """Packets a delay line must hold: `factor` bandwidth-delay products, within bounds.

    A delay line holds every packet in flight for the delay; fewer slots than that drop
    packets the configuration never asked to lose.
    """
    rate = rate_bps or ceiling_bps
    packets = math.ceil(factor * rate * rtt_s / 8 / (mtu + ETHERNET_HEADER))
    return max(minimum, min(cap, packets))


def bottleneck_packets(rate_bps: int, rtt_s: float, mtu: int) -> int:
    """The rate limiter's own buffer: one BDP at the link rate (at least 100 packets)."""
    return max(100, math.ceil(rate_bps * max(rtt_s, 0.001) / 8 / (mtu + ETHERNET_HEADER)))


def htb_argv(dev: str, rate_bps: int, *, mtu: int = 1500) -> list[list[str]]:
    """Root htb with one class at `rate_bps` (rate = ceil: no borrowing), default class 1:1.

    The burst covers 1 ms at the rate (at least a few frames) so that the timer granularity
    does not cap the rate below its setting on fast links.
    """
    frame = mtu + ETHERNET_HEADER
    return [
        ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
        _htb_class(dev, "1:1", rate_bps, frame),
    ]


def loss_args(loss: LossSpec) -> list[str]:
    """netem's loss syntax; every parameter spelled out so iproute2 versions agree.

    Defaults follow harness.spec: gemodel r = 100 - p, 1-h = 100 (h field), 1-k = 0 (k field);
    state p31 = 100 - p13, p32 = 0, p23 = 100, p14 = 0 (tc's own defaults).
    """
    if not loss.active:
        return []
    if loss.model == "random":
        args = ["loss", "random", percent(loss.p)]
        if loss.correlation:
            args.append(percent(loss.correlation))
        return args
    if loss.model == "gemodel":
        return ["loss", "gemodel", *map(percent, gemodel_params(loss))]
    return ["loss", "state", *map(percent, state_params(loss))]


def gemodel_params(loss: LossSpec) -> tuple[float, float, float, float]:
    """(p, r, 1-h, 1-k) in percent: the spec's h and k fields hold netem's 1-h and 1-k."""
    r = loss.r if loss.r is not None else 100.0 - loss.p
    one_minus_h = loss.h if loss.h is not None else 100.0
    one_minus_k = loss.k if loss.k is not None else 0.0
    return (loss.p, r, one_minus_h, one_minus_k)


def state_params(loss: LossSpec) -> tuple[float, float, float, float, float]:
    """(p13, p31, p32, p23, p14) in percent."""
    p13 = loss.p13 or 0.0
    return (
        p13,
        loss.p31 if loss.p31 is not None else 100.0 - p13,
        loss.p32 if loss.p32 is not None else 0.0,
        loss.p23 if loss.p23 is not None else 100.0,
        loss.p14 if loss.p14 is not None else 0.0,
    )


def netem_args(direction: DirectionSpec, *, limit: int, seed: int | None = None) -> list[str]:
    """The `netem ...` part: limit, delay/jitter, loss, duplicate, reorder."""
    args = ["netem", "limit", str(limit)]
    if direction.delay or direction.jitter:
        args += ["delay", micros(direction.delay)]
        if direction.jitter:
            args.append(micros(direction.jitter))
            if direction.delay_correlation:
                args.append(percent(direction.delay_correlation))
            # netem's jitter is uniform unless a distribution table is named; there is no
            # 'uniform' table, so uniform is spelled by leaving the keyword out.
            if direction.jitter_distribution != "uniform":
                args += ["distribution", direction.jitter_distribution]
    args += loss_args(direction.loss)
    if direction.duplicate:
        args += ["duplicate", percent(direction.duplicate)]
    if direction.reorder:
        args += ["reorder", percent(direction.reorder)]
        if direction.reorder_gap:
            args += ["gap", str(direction.reorder_gap)]
    if seed is not None:
        args += ["seed", str(seed)]
    return args


def netem_argv(
    direction: DirectionSpec,
    dev: str,
    *,
    rtt: float | None = None,
    limit: int | None = None,
    seed: int | None = None,
) -> list[list[str]]:
    """tc commands giving `dev` (the router's egress) this direction's behaviour.

    With a rate: htb root, class 1:1 at the rate, netem (or a plain fifo when nothing else is
    impaired) as the class's child, so packets are delayed and then paced. Without a rate:
    netem at the root. `rtt` sizes the queues (default: twice this direction's delay plus
    jitter); `limit` overrides the netem queue length in packets.
    """
    if rtt is None:
        rtt = 2 * (direction.delay + direction.jitter)
    commands: list[list[str]] = []
    if direction.impaired:
        size = limit if limit is not None else queue_packets(direction.rate, rtt, direction.mtu)
        netem = netem_args(direction, limit=size, seed=seed)
        if direction.rate:
            commands += htb_argv(dev, direction.rate, mtu=direction.mtu)
            commands.append(
                ["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *netem]
            )
        else:
            commands.append(["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", *netem])
    elif direction.rate:
        commands += rate_argv(direction, dev, rtt=rtt)
    return commands


def rate_argv(direction: DirectionSpec, dev: str, *, rtt: float) -> list[list[str]]:
    """Rate limit alone (any backend): htb class plus a tail-drop fifo of one BDP."""
    assert direction.rate
    fifo = bottleneck_packets(direction.rate, rtt, direction.mtu)
    return [
        *htb_argv(dev, direction.rate, mtu=direction.mtu),
        [
            "tc",
            "qdisc",
            "add",
            "dev",
            dev,
            "parent",
            "1:1",
            "handle",
            "10:",
            "pfifo",
            "limit",
            str(fifo),
        ],
    ]


def classified_argv(
    dev: str,
    members: list[tuple[str, DirectionSpec]],
    *,
    rtt: float,
    netem: bool,
    ceiling_bps: int | None = None,
) -> list[list[str]]:
    """One egress shared by several directions (the reverse paths of a fleet's secondaries,
    all towards the primary): a root htb whose class 1:1 caps everything at `ceiling_bps`
    (the primary's uplink, when it has a rate), a default class 1:2 for other traffic, and
    per member a class at its rate matched by its source subnet, holding its netem (when
    `netem` and the direction is impaired) or a tail-drop fifo."""
    mtu = min((spec.mtu for _, spec in members), default=1500)
    frame = mtu + ETHERNET_HEADER
    top = ceiling_bps or CEILING_BPS
    # Children are guaranteed an equal share and borrow up to their own ceiling: the sum of
    # their guarantees stays within the parent, so the parent's cap holds.
    share = max(8_000, top // (len(members) + 1))
    commands = [
        ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "2"],
        _htb_class(dev, "1:1", top, frame),
        _htb_class(dev, "1:2", share, frame, parent="1:1", ceil_bps=top),
        ["tc", "qdisc", "add", "dev", dev, "parent", "1:2", "handle", "2:", "pfifo", "limit",
         str(bottleneck_packets(top, rtt, mtu))],
    ]  # fmt: skip
    for index, (subnet, spec) in enumerate(members):
        classid = f"1:{10 + index}"
        rate = min(spec.rate or top, top)
        child = _htb_class(
            dev, classid, min(share, rate), spec.mtu + ETHERNET_HEADER, "1:1", ceil_bps=rate
        )
        commands.append(child)
        if netem and spec.impaired:
            leaf = netem_args(spec, limit=queue_packets(spec.rate, rtt, spec.mtu))
        else:
            leaf = ["pfifo", "limit", str(bottleneck_packets(rate, rtt, spec.mtu))]
        commands.append(
            ["tc", "qdisc", "add", "dev", dev, "parent", classid, "handle", f"{10 + index}:",
             *leaf]
        )  # fmt: skip
        commands.append(
            ["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
             "u32", "match", "ip", "src", subnet, "flowid", classid]
        )  # fmt: skip
    return commands


def _htb_class(
    dev: str,
    classid: str,
    rate_bps: int,
    frame: int,
    parent: str = "1:",
    ceil_bps: int | None = None,
) -> list[str]:
    """An htb class guaranteed `rate_bps` that may borrow from its parent up to `ceil_bps`
    (default: the rate, no borrowing)."""
    ceil = ceil_bps or rate_bps
    burst = max(4 * frame, math.ceil(ceil / 8 / 1000))
    return ["tc", "class", "add", "dev", dev, "parent", parent, "classid", classid, "htb",
            "rate", f"{rate_bps}bit", "ceil", f"{ceil}bit", "burst", str(burst),
            "cburst", str(burst), "quantum", str(frame)]  # fmt: skip


_SENT = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+) requeues (\d+)\)")
_BACKLOG = re.compile(r"backlog (\d+)b (\d+)p")


def parse_tc_stats(text: str) -> list[dict[str, Any]]:
    """`tc -s qdisc|class show` text -> one dict per qdisc or class.

    Text, not `tc -j`: iproute2 6.1 prints no JSON for htb classes.
    """
    entries: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line and not line[0].isspace():
            words = line.split()
            if len(words) >= 3 and words[0] in ("qdisc", "class"):
                entry = {"type": words[0], "kind": words[1], "handle": words[2]}
                if len(words) >= 4 and words[3] == "root":
                    entry["parent"] = "root"
                elif len(words) >= 5 and words[3] == "parent":
                    entry["parent"] = words[4]
                entries.append(entry)
            continue
        if not entries:
            continue
        if sent := _SENT.search(line):
            entries[-1].update(
                zip(
                    ("bytes", "packets", "drops", "overlimits", "requeues"),
                    map(int, sent.groups()),
                    strict=True,
                )
            )
        elif backlog := _BACKLOG.search(line):
            entries[-1]["backlog_bytes"], entries[-1]["backlog_packets"] = map(
                int, backlog.groups()
            )
    return entries
