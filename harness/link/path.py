"""The path a transfer crosses, as the model bounds see it (pure): a site's link after the
primary's uplink joined into one link, its round-trip time (the one definition: configured
and longest), and the bounds of the forward direction with the hosts' effective buffers.
Used by the runner to put a bound beside each throughput, by `xfrbench link test`, by the
testbed to size the emulator's queues, and by the report's link checks.
"""

from __future__ import annotations

from typing import Any

from harness.link import bounds as model
from harness.link.losscheck import expected_loss_percent
from harness.spec import DirectionSpec, LinkSpec, LossSpec


def _int_words(value: str | None, index: int) -> int | None:
    try:
        return int((value or "").split()[index])
    except (IndexError, ValueError):
        return None


def compute_bound(
    link: LinkSpec, describe: dict[str, Any], receiver: str = "secondary"
) -> model.LinkBounds:
    """Bounds for the forward direction (the primary sends to `receiver`, a host of the
    testbed's description) with the hosts' effective buffers."""
    hosts = describe["hosts"]
    rcv = _int_words(hosts[receiver]["sysctls"].get("net.ipv4.tcp_rmem"), 2)
    snd = _int_words(hosts["primary"]["sysctls"].get("net.ipv4.tcp_wmem"), 2)
    loss = expected_loss_percent(link.forward.loss)
    cc = hosts["primary"]["sysctls"].get("net.ipv4.tcp_congestion_control", "")
    return model.link_bounds(
        loss_based=cc != "bbr",
        rtt_s=configured_rtt(link),
        mtu=min(link.forward.mtu, link.reverse.mtu),
        loss=(loss or 0.0) / 100,
        rate_bps=link.forward.rate,
        receive_buffer=rcv,
        send_buffer=snd,
    )


def through(site: LinkSpec, uplink: LinkSpec) -> LinkSpec:
    """The path a transfer to a site crosses: the primary's uplink, then the site's link,
    as one link for the model bounds. Delays and jitters add, the slower rate and smaller
    MTU hold; random losses combine as independent drops, and a bursty model stands for
    the path when one side has one (the other's random loss is then left out)."""
    if not (uplink.impaired or uplink.forward.rate or uplink.reverse.rate):
        return site

    def join(a: DirectionSpec, b: DirectionSpec) -> DirectionSpec:
        loss = a.loss if b.loss.model == "random" and not b.loss.active else b.loss
        if a.loss.model == b.loss.model == "random" and a.loss.active and b.loss.active:
            kept = (1 - a.loss.p / 100) * (1 - b.loss.p / 100)
            loss = LossSpec(model="random", p=100 * (1 - kept))
        elif a.loss.model != "random" and b.loss.model == "random":
            loss = a.loss
        rates = [r for r in (a.rate, b.rate) if r]
        return a.model_copy(
            update={
                "delay": a.delay + b.delay,
                "jitter": a.jitter + b.jitter,
                "loss": loss,
                "rate": min(rates) if rates else None,
                "mtu": min(a.mtu, b.mtu),
            }
        )

    return site.model_copy(
        update={
            "forward": join(site.forward, uplink.forward),
            "reverse": join(site.reverse, uplink.reverse),
        }
    )


def configured_rtt(link: LinkSpec) -> float:
    """The link's round-trip time as configured: both delays (what the model bounds and the
    link checks read measurements against)."""
    return link.forward.delay + link.reverse.delay


def longest_rtt(link: LinkSpec) -> float:
    """The longest round trip a packet may see on `link`: both delays plus both jitters
    (what an emulator's queues must hold)."""
    return configured_rtt(link) + link.forward.jitter + link.reverse.jitter
