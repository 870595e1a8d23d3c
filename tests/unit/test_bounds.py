"""Model bounds against hand-computed values."""

from __future__ import annotations

import math

import pytest

from harness.link import bounds
from harness.link.losscheck import expected_loss_percent
from harness.linktest.tools import flood_pps, parse_ping, within
from harness.spec import LossSpec


def test_window_limit_of_the_seed_example() -> None:
    # 64 KB unscaled window (65535 B) over a 560 ms RTT: 117,027 B/s.
    assert bounds.window_limit_bps(65_535, 0.56) / 8 == pytest.approx(117_027, abs=0.5)
    assert bounds.window_limit_bps(65_535, 0.56) == pytest.approx(936_214.29, abs=0.01)


def test_bdp() -> None:
    assert bounds.bdp_bytes(1e9, 0.3) == 37_500_000
    assert bounds.bdp_bytes(100e6, 0.1) == 1_250_000


def test_mss_and_goodput_at_rate() -> None:
    assert bounds.mss_for_mtu(1500) == 1448
    assert bounds.mss_for_mtu(1500, timestamps=False) == 1460
    # 100 Mbit/s of 1514-byte frames carries 1448 payload bytes per frame.
    assert bounds.goodput_at_rate_bps(100e6, 1500) == pytest.approx(100e6 * 1448 / 1514)


def test_mathis() -> None:
    # 1448 B * 8 / 0.3 s * sqrt(3/2) / sqrt(0.1) = 38,613.33 * sqrt(15) = 149,548.8 bit/s
    assert bounds.mathis_bps(1448, 0.3, 0.1) == pytest.approx(149_548.8, abs=0.1)
    # 1 % loss, 100 ms: 115,840 * sqrt(1.5) / 0.1 = 1,418,744.5 bit/s
    assert bounds.mathis_bps(1448, 0.1, 0.01) == pytest.approx(1_418_744.5, abs=0.1)
    assert math.isinf(bounds.mathis_bps(1448, 0.1, 0.0))


def test_pftk_full_formula() -> None:
    # RTT 0.3 s, p 0.1, T0 0.5 s, b 2:
    #   0.3 * sqrt(0.4/3) = 0.1095445
    #   0.5 * min(1, 3 * sqrt(0.6/8)) * 0.1 * (1 + 0.32) = 0.5 * 0.8215838 * 0.132 = 0.0542245
    #   1 / 0.1637690 = 6.10616 packets/s -> * 1448 * 8 = 70,733.8 bit/s
    assert bounds.pftk_packets_per_s(0.3, 0.1, rto_s=0.5, b=2) == pytest.approx(6.10616, rel=1e-5)
    assert bounds.pftk_bps(1448, 0.3, 0.1, rto_s=0.5, b=2) == pytest.approx(70_733.8, abs=1)
    # b = 1 (an ACK per segment): 1 / (0.0774597 + 0.0383425) = 8.63541 packets/s
    assert bounds.pftk_packets_per_s(0.3, 0.1, rto_s=0.5, b=1) == pytest.approx(8.63541, rel=1e-5)
    # Default RTO is Linux's: RTT + 200 ms.
    assert bounds.pftk_bps(1448, 0.3, 0.1) == bounds.pftk_bps(1448, 0.3, 0.1, rto_s=0.5)


def test_pftk_timeouts_saturate_at_high_loss() -> None:
    # p = 0.5: min(1, 3*sqrt(3*2*0.5/8)) = 1; denominator 0.1*sqrt(2/3) + 0.3*0.5*9 = 1.43165
    assert bounds.pftk_packets_per_s(0.1, 0.5, rto_s=0.3) == pytest.approx(1 / 1.4316497, rel=1e-6)


def test_pftk_window_cap_and_no_loss() -> None:
    assert bounds.pftk_packets_per_s(0.1, 0.0001, rto_s=0.3, wmax_packets=10) == 100.0
    assert bounds.pftk_packets_per_s(0.1, 0.0, rto_s=0.3, wmax_packets=10) == 100.0
    assert math.isinf(bounds.pftk_packets_per_s(0.1, 0.0, rto_s=0.3))


def test_link_bounds_rate_limited() -> None:
    b = bounds.link_bounds(
        rtt_s=0.1, rate_bps=100e6, receive_buffer=6_291_456, send_buffer=4_194_304
    )
    assert b.limited_by == "rate"
    assert b.model_bps == pytest.approx(100e6 * 1448 / 1514)
    assert b.receive_window_bps == pytest.approx(8 * 6_291_456 / 0.1)
    assert b.send_window_bps == pytest.approx(8 * 4_194_304 / 0.1)
    assert b.bdp_bytes == 1_250_000
    assert b.mathis_bps is None and b.pftk_bps is None


def test_link_bounds_window_limited() -> None:
    b = bounds.link_bounds(rtt_s=0.56, receive_buffer=65_535)
    assert b.limited_by == "receive window"
    assert b.model_bps == pytest.approx(936_214.29, abs=0.01)


def test_link_bounds_lossy_and_bbr() -> None:
    lossy = bounds.link_bounds(rtt_s=0.3, loss=0.1, receive_buffer=6_291_456)
    assert lossy.limited_by == "loss (PFTK)"
    assert lossy.model_bps == pytest.approx(70_733.8, abs=1)
    assert lossy.mathis_bps == pytest.approx(149_548.8, abs=0.1)
    bbr = bounds.link_bounds(rtt_s=0.3, loss=0.1, receive_buffer=6_291_456, loss_based=False)
    assert bbr.limited_by == "receive window"
    assert bbr.pftk_bps == lossy.pftk_bps  # still reported, not binding
    assert bounds.link_bounds(rtt_s=0.0).to_json()["model_bps"] is None


def test_expected_loss_of_models() -> None:
    assert expected_loss_percent(LossSpec(model="random", p="10%")) == 10
    assert expected_loss_percent(LossSpec()) == 0
    # Gilbert-Elliott: pi_bad = p / (p + r) = 1 / (1 + 9) -> loss 10 % with 1-h = 100 %.
    assert expected_loss_percent(LossSpec(model="gemodel", p="1%", r="9%")) == pytest.approx(10)
    assert expected_loss_percent(
        LossSpec(model="gemodel", p="1%", r="9%", h="50%", k="1%")
    ) == pytest.approx(100 * (0.9 * 0.01 + 0.1 * 0.5))
    assert expected_loss_percent(LossSpec(model="state", p13="5%")) is None


def test_parse_ping() -> None:
    out = (
        "PING 198.18.0.130 (198.18.0.130) 56(84) bytes of data.\n"
        "64 bytes from 198.18.0.130: icmp_seq=1 ttl=63 time=100 ms\n"
        "64 bytes from 198.18.0.130: icmp_seq=2 ttl=63 time=101.5 ms\n"
        "64 bytes from 198.18.0.130: icmp_seq=2 ttl=63 time=102 ms (DUP!)\n"
        "64 bytes from 198.18.0.130: icmp_seq=4 ttl=63 time=99.5 ms\n\n"
        "--- 198.18.0.130 ping statistics ---\n"
        "5 packets transmitted, 3 received, +1 duplicates, 40% packet loss, time 40ms\n"
    )
    sample = parse_ping(out, 3)
    assert sample.sent == 5 and sample.samples == 3
    assert sample.mean_ms == pytest.approx(100.333, abs=1e-3)
    assert sample.median_ms == 100 and sample.min_ms == 99.5 and sample.max_ms == 101.5
    assert math.isnan(parse_ping("", 10).mean_ms)


def test_tolerance_and_flood_pacing() -> None:
    assert within(100.9, 100, absolute=1, relative=0.02)
    assert within(103.0, 100, absolute=1, relative=0.02)
    assert not within(103.1, 100, absolute=1, relative=0.02)
    assert flood_pps(None, 64) == 20_000
    # 1 Mbit/s, 106-byte frames: half the link is 589.6 packets/s.
    assert flood_pps(1_000_000, 64) == pytest.approx(0.5e6 / (8 * 106))
