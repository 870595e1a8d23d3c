"""Model bounds for TCP over a link: what a transfer can reach, to read measurements against.

Pure functions, SI units: bit/s, bytes, seconds, loss as a fraction (0..1).

- bandwidth-delay product: bytes in flight needed to fill the link.
- window limit: a window of W bytes allows at most W / RTT (receiver buffer, sender buffer).
- Mathis et al. (1997): MSS / RTT * C / sqrt(p), C = sqrt(3/2), for periodic loss.
- PFTK, Padhye, Firoiu, Towsley, Kurose (1998), "full model" with timeouts:
    B = min(Wmax / RTT,
            1 / (RTT * sqrt(2bp/3) + T0 * min(1, 3 * sqrt(3bp/8)) * p * (1 + 32 p^2)))
  packets per second; b = packets acknowledged per ACK (2 with delayed ACKs), T0 = RTO.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

MATHIS_C = math.sqrt(3 / 2)
ETHERNET_HEADER = 14
IP_TCP_HEADERS = 40
TCP_TIMESTAMPS = 12
LINUX_RTO_MIN = 0.2  # seconds: Linux's tcp_rto_min (RFC 6298 says 1 s; Linux uses 200 ms)


def mss_for_mtu(mtu: int, *, timestamps: bool = True) -> int:
    """Payload bytes per full segment: MTU - IP/TCP headers - the timestamp option."""
    return mtu - IP_TCP_HEADERS - (TCP_TIMESTAMPS if timestamps else 0)


def bdp_bytes(rate_bps: float, rtt_s: float) -> float:
    return rate_bps * rtt_s / 8


def window_limit_bps(window_bytes: float, rtt_s: float) -> float:
    """Throughput a window allows: window / RTT (bits per second)."""
    if rtt_s <= 0:
        return math.inf
    return 8 * window_bytes / rtt_s


def goodput_at_rate_bps(rate_bps: float, mtu: int, *, timestamps: bool = True) -> float:
    """TCP payload rate a link of `rate_bps` carries when counted per Ethernet frame."""
    return rate_bps * mss_for_mtu(mtu, timestamps=timestamps) / (mtu + ETHERNET_HEADER)


def mathis_bps(mss: int, rtt_s: float, loss: float, *, c: float = MATHIS_C) -> float:
    if loss <= 0 or rtt_s <= 0:
        return math.inf
    return 8 * mss / rtt_s * c / math.sqrt(loss)


def linux_rto(rtt_s: float, *, rto_min: float = LINUX_RTO_MIN) -> float:
    """Linux's RTO for a steady RTT: srtt + max(4 * rttvar, rto_min) = RTT + 200 ms."""
    return rtt_s + rto_min


def pftk_packets_per_s(
    rtt_s: float, loss: float, *, rto_s: float, b: int = 2, wmax_packets: float | None = None
) -> float:
    if rtt_s <= 0:
        return math.inf
    window = wmax_packets / rtt_s if wmax_packets else math.inf
    if loss <= 0:
        return window
    p = loss
    denominator = rtt_s * math.sqrt(2 * b * p / 3) + rto_s * min(
        1.0, 3 * math.sqrt(3 * b * p / 8)
    ) * p * (1 + 32 * p * p)
    return min(window, 1 / denominator)


def pftk_bps(
    mss: int,
    rtt_s: float,
    loss: float,
    *,
    rto_s: float | None = None,
    b: int = 2,
    wmax_bytes: float | None = None,
) -> float:
    rto = linux_rto(rtt_s) if rto_s is None else rto_s
    wmax_packets = wmax_bytes / mss if wmax_bytes else None
    return 8 * mss * pftk_packets_per_s(rtt_s, loss, rto_s=rto, b=b, wmax_packets=wmax_packets)


@dataclass(frozen=True)
class LinkBounds:
    """Every figure in bit/s except bdp_bytes; None where it does not apply."""

    rtt_s: float
    mss: int
    loss: float
    rate_bps: float | None
    rate_goodput_bps: float | None
    bdp_bytes: float | None
    receive_window_bps: float | None
    send_window_bps: float | None
    mathis_bps: float | None
    pftk_bps: float | None
    model_bps: float | None
    limited_by: str | None

    def to_json(self) -> dict[str, float | int | str | None]:
        return {
            key: (None if isinstance(value, float) and math.isinf(value) else value)
            for key, value in asdict(self).items()
        }

    def named_bps(self) -> dict[str, float]:
        """The bounds a transfer record carries (bit/s; only those that apply)."""
        named = {
            "model": self.model_bps,
            "rate": self.rate_goodput_bps,
            "receive_window": self.receive_window_bps,
            "send_window": self.send_window_bps,
            "mathis": self.mathis_bps,
            "pftk": self.pftk_bps,
        }
        return {
            key: float(value)
            for key, value in named.items()
            if value is not None and value > 0 and not math.isinf(value)
        }


def link_bounds(
    *,
    rtt_s: float,
    mtu: int = 1500,
    loss: float = 0.0,
    rate_bps: float | None = None,
    receive_buffer: int | None = None,
    send_buffer: int | None = None,
    b: int = 2,
    rto_s: float | None = None,
    timestamps: bool = True,
    loss_based: bool = True,
) -> LinkBounds:
    """All bounds for one direction; model_bps is the lowest that applies.

    receive_buffer is the receiver's tcp_rmem max, send_buffer the sender's tcp_wmem max: both
    cap the window (Linux keeps part of each for overhead, so these are upper bounds).
    loss_based=False (BBR) still reports Mathis and PFTK but leaves them out of model_bps:
    both models assume a sender that halves its window on loss (Reno, CUBIC).
    """
    mss = mss_for_mtu(mtu, timestamps=timestamps)
    candidates: dict[str, float] = {}
    goodput = goodput_at_rate_bps(rate_bps, mtu, timestamps=timestamps) if rate_bps else None
    if goodput:
        candidates["rate"] = goodput
    rwnd = window_limit_bps(receive_buffer, rtt_s) if receive_buffer else None
    if rwnd is not None and not math.isinf(rwnd):
        candidates["receive window"] = rwnd
    swnd = window_limit_bps(send_buffer, rtt_s) if send_buffer else None
    if swnd is not None and not math.isinf(swnd):
        candidates["send window"] = swnd
    mathis = pftk = None
    if loss > 0 and rtt_s > 0:
        mathis = mathis_bps(mss, rtt_s, loss)
        pftk = pftk_bps(mss, rtt_s, loss, rto_s=rto_s, b=b)
        if loss_based:
            candidates["loss (PFTK)"] = pftk
    limited_by = min(candidates, key=lambda k: candidates[k]) if candidates else None
    return LinkBounds(
        rtt_s=rtt_s,
        mss=mss,
        loss=loss,
        rate_bps=rate_bps,
        rate_goodput_bps=goodput,
        bdp_bytes=bdp_bytes(rate_bps, rtt_s) if rate_bps else None,
        receive_window_bps=rwnd,
        send_window_bps=swnd,
        mathis_bps=mathis,
        pftk_bps=pftk,
        model_bps=candidates[limited_by] if limited_by else None,
        limited_by=limited_by,
    )


def with_advertised_window(
    bound: dict[str, float], window_bytes: int, rtt_s: float
) -> dict[str, float]:
    """A transfer's named bounds (LinkBounds.named_bps) with the window the receiver really
    advertised: tcp_rmem is a buffer, not a window (the kernel keeps part of it for
    overhead), so rmem max / RTT overstates what the receiver lets through. The buffer
    figure stays as `receive_buffer`; `receive_window` becomes window / RTT, and the model
    bound the lower of the two."""
    if window_bytes <= 0 or rtt_s <= 0:
        return dict(bound)
    out = dict(bound)
    if "receive_window" in out:
        out["receive_buffer"] = out.pop("receive_window")
    advertised = window_limit_bps(window_bytes, rtt_s)
    out["receive_window"] = advertised
    out["model"] = min(out.get("model", advertised), advertised)
    return out
