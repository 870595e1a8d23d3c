"""The real path's measures: iperf3's probe (on its captured output), the primary's
connections reduced per secondary, and the run's totals per path."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.inventory import load_inventory
from harness.remote.paths import add_transfer, parse_iperf, probe_targets
from harness.remote.pathwatch import path_counts

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "iperf3"


def test_iperf3s_reverse_test_gives_what_the_secondary_received() -> None:
    probe = parse_iperf((CAPTURES / "reverse-lab.json").read_text())
    assert probe == {
        "bits_per_second": 11970809234,
        "seconds": 2.0,
        "retransmits": 473,  # the sender's: the primary's
        "tool": "iperf 3.12",
        "direction": "primary to secondary",
    }


def test_a_probe_that_could_not_run_says_why() -> None:
    refused = parse_iperf((CAPTURES / "refused.json").read_text())
    assert refused == {"error": "unable to connect to server: Connection refused"}
    assert parse_iperf("")["error"] == "no output"
    assert parse_iperf("iperf3: command not found")["error"] == "iperf3: command not found"


def test_each_sites_first_secondary_is_probed(tmp_path: Path) -> None:
    path = tmp_path / "lab.ini"
    path.write_text(
        "[primary]\nns0 ansible_host=192.0.2.1\n[secondaries]\n"
        "ns1 ansible_host=192.0.2.2 site=near\nns2 ansible_host=192.0.2.3 site=near\n"
        "ns3 ansible_host=192.0.2.4 site=far\n"
    )
    assert probe_targets(load_inventory(path)) == ["ns1", "ns3"]


def test_the_primarys_connections_sum_per_secondary() -> None:
    last = {
        ("198.18.0.34", 40001, 53): {"data_segs_out": 900, "total_retrans": 9, "min_rtt": 1500},
        ("198.18.0.34", 40002, 53): {"data_segs_out": 100, "total_retrans": 1, "min_rtt": 1200},
        ("::ffff:198.18.0.66", 40003, 53): {"data_segs_out": 50, "total_retrans": 0},
    }
    counts = path_counts(last, ["198.18.0.34", "198.18.0.66", "198.18.0.98"])
    assert counts == {
        "198.18.0.34": {"connections": 2, "data_segs_out": 1000, "retransmits": 10,
                        "retransmit_pct": 1.0, "rtt_ms_min": 1.2},
        "198.18.0.66": {"connections": 1, "data_segs_out": 50, "retransmits": 0,
                        "retransmit_pct": 0.0, "rtt_ms_min": None},
    }  # fmt: skip


def test_the_runs_retransmits_per_path() -> None:
    totals: dict = {}
    add_transfer(totals, "ns1", {"data_segs_out": 1000, "retransmits": 10, "rtt_ms_min": 1.2})
    add_transfer(totals, "ns1", {"data_segs_out": 3000, "retransmits": 30, "rtt_ms_min": 0.9})
    add_transfer(totals, "ns1", None)  # a failed transfer's record: no counts
    add_transfer(totals, None, {"data_segs_out": 1})
    assert totals == {
        "ns1": {"transfers": 2, "data_segs_out": 4000, "retransmits": 40,
                "retransmit_pct": 1.0, "tcp_rtt_min_s": pytest.approx(0.0009)},
    }  # fmt: skip
