"""The sampler on the test process itself (no cgroup: source "proc"), and link counters."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from harness.observe import sampler as sampler_module
from harness.observe.procfs import read_port_range
from harness.observe.sampler import CPU_BUDGET, Sampler, Target, normalize_link_counters
from harness.results.resources import load_samples

SERVER_KEYS = {
    "t",
    "event",
    "case",
    "repeat",
    "role",
    "server",
    "pid",
    "host",
    "source",
    "cpu_user_s",
    "cpu_system_s",
    "cpu_resolution_s",
    "anon_bytes",
    "charged_bytes",
    "charged_peak_bytes",
    "tcp",
    "tcp_states",
    "ephemeral_ports_in_use",
    "retrans_segs",
    "tcp_timeouts",
    "active_opens",
    "passive_opens",
    "tcp_sockets_source",
    "net_tx_bytes",
    "net_rx_bytes",
}
LINKEM = {
    "forward": {
        "received": 120,
        "passed": 100,
        "dropped_loss": 15,
        "dropped_overflow": 5,
        "duplicated": 0,
        "reordered": 0,
        "queued_now": 0,
        "max_queued": 9,
        "updated_at_unix": 1.5,
    },
    "reverse": {},  # an unimpaired direction: no queue, no counters
}


def _wait_for(predicate: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _burn() -> None:
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass


def test_samples_own_process_periodically_and_at_marks(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"
    seen: list[dict[str, Any]] = []
    me = Target(role="secondary", server="knot", pid=os.getpid())
    with Sampler(out, interval=0.05, on_sample=seen.append) as sampler:
        first = sampler.watch("case-a", [me], lambda: LINKEM, {"secondary": read_port_range(None)})
        assert [line["event"] for line in first] == ["periodic", "periodic"]
        _wait_for(lambda: len(out.read_text().splitlines()) >= 6, "three periodic samples")
        start = sampler.mark("transfer-start", 0)
        _burn()
        periodic_in_transfer = len(seen)
        _wait_for(lambda: len(seen) > periodic_in_transfer, "a sample during the transfer")
        end = sampler.mark("transfer-end", 0)
        last = sampler.unwatch()
        count = len(out.read_text().splitlines())
        time.sleep(0.2)  # unwatched: nothing more is written
        assert len(out.read_text().splitlines()) == count
        assert sampler.errors == []
        assert sampler.sample_cost_s is not None and sampler.sample_cost_s > 0

    lines = load_samples(out)
    assert lines == seen  # every line written also went to on_sample, in order
    servers = [line for line in lines if line["role"] == "secondary"]
    links = [line for line in lines if line["role"] == "link"]
    assert len(servers) == len(links)  # the unimpaired reverse direction has no line
    for line in servers:
        assert set(line) == SERVER_KEYS
        assert line["case"] == "case-a" and line["pid"] == os.getpid()
        assert line["source"] == "proc" and line["charged_bytes"] is None
        assert line["cpu_resolution_s"] == 1 / os.sysconf("SC_CLK_TCK")  # /proc's tick
        assert line["tcp_sockets_source"] == "sock_diag"  # its own namespace: no setns needed
        assert line["anon_bytes"] > 0 and line["charged_peak_bytes"] is None
        assert set(line["tcp"]) == {"inuse", "orphan", "time_wait", "alloc"}
        assert all(n > 0 for n in line["tcp_states"].values())
    for line in links:
        assert line["direction"] == "forward"
        assert (line["passed"], line["dropped"]) == (100, 20)
    (start_line,) = [line for line in start if line["role"] == "secondary"]
    (end_line,) = [line for line in end if line["role"] == "secondary"]
    assert (start_line["event"], start_line["repeat"]) == ("transfer-start", 0)
    assert (end_line["event"], end_line["repeat"]) == ("transfer-end", 0)
    cpu = lambda s: s["cpu_user_s"] + s["cpu_system_s"]  # noqa: E731
    assert cpu(end_line) > cpu(start_line)  # the 50 ms of CPU burnt in between
    # Periodic lines inside a transfer carry its repeat; outside, null.
    inside = [s for s in servers if start_line["t"] < s["t"] < end_line["t"]]
    assert inside and all(s["repeat"] == 0 and s["event"] == "periodic" for s in inside)
    assert last[0]["repeat"] is None and servers[0]["repeat"] is None
    times = [line["t"] for line in lines]
    assert times == sorted(times)


def test_slow_samples_stretch_the_interval_to_keep_their_cpu_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fleet's sample takes ~1-3 ms of CPU per server; here each takes 4 ms: at a 2 %
    # budget the periodic samples come every 0.2 s at least, not every 0.05 s asked for.
    real = sampler_module.read_usage

    def slow(target: Target) -> Any:
        spent = time.thread_time() + 0.004
        while time.thread_time() < spent:  # CPU, which the budget counts (a sleep is free)
            pass
        return real(target)

    monkeypatch.setattr(sampler_module, "read_usage", slow)
    out = tmp_path / "samples.jsonl"
    me = Target(role="secondary", server="knot", pid=os.getpid())
    with Sampler(out, interval=0.05) as sampler:
        sampler.watch("case-a", [me], None, {"secondary": read_port_range(None)})
        _wait_for(lambda: len(out.read_text().splitlines()) >= 4, "four samples")
        sampler.unwatch()
    assert sampler.longest_interval_s >= 0.004 / CPU_BUDGET
    assert sampler.cpu_s >= 4 * 0.004
    times = [line["t"] for line in load_samples(out)]
    assert all(b - a >= 0.18 for a, b in itertools.pairwise(times[1:-1]))


def test_marks_are_paid_for_by_the_periodic_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ten marks of 4 ms of CPU each (40 ms) at a 2 % budget buy two seconds without a
    # periodic sample, whatever the 0.05 s interval asked for.
    real = sampler_module.read_usage
    costly = {"on": False}

    def slow(target: Target) -> Any:
        if costly["on"]:
            spent = time.thread_time() + 0.004
            while time.thread_time() < spent:
                pass
        return real(target)

    monkeypatch.setattr(sampler_module, "read_usage", slow)
    out = tmp_path / "samples.jsonl"
    me = Target(role="secondary", server="knot", pid=os.getpid())
    with Sampler(out, interval=0.05) as sampler:
        sampler.watch("case-a", [me], None, {"secondary": read_port_range(None)})
        _wait_for(lambda: len(out.read_text().splitlines()) >= 3, "periodic samples")
        costly["on"] = True
        for _ in range(10):
            sampler.mark("transfer-start", 1)
        costly["on"] = False
        marked = time.monotonic()
        count = len(out.read_text().splitlines())
        time.sleep(1.0)
        later = [line for line in load_samples(out)[count:] if line["event"] == "periodic"]
        sampler.unwatch()
    assert time.monotonic() - marked >= 1.0
    assert len(later) <= 1  # the one already due when the marks came, at most
    assert sampler.cpu_s >= 0.04


def test_exited_process_is_skipped_quietly(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"
    child = subprocess.Popen(["sleep", "30"])
    try:
        targets = [
            Target("primary", "nsd", child.pid),
            Target("secondary", "bind", os.getpid()),
        ]
        ranges = {"primary": (32768, 60999), "secondary": (32768, 60999)}
        with Sampler(out, interval=60) as sampler:
            assert {s["role"] for s in sampler.watch("c", targets, None, ranges)} == {
                "primary",
                "secondary",
            }
            child.kill()
            child.wait()
            lines = sampler.mark("transfer-start", 1)
            assert [s["role"] for s in lines] == ["secondary"]
            assert sampler.errors == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_failures_are_reported_once_and_sampling_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"

    def broken_link() -> dict[str, Any]:
        raise OSError("tc vanished")

    def broken_exporter(line: dict[str, Any]) -> None:
        raise RuntimeError("exporter bug")

    me = Target("primary", "bind", os.getpid())
    with Sampler(out, interval=60, on_sample=broken_exporter) as sampler:
        sampler.watch("c", [me], broken_link, {"primary": (1, 65535)})
        sampler.mark("transfer-start", 0)
        sampler.mark("transfer-end", 0)
        assert sampler.errors == [
            "sampling link: OSError: tc vanished",
            "sampling on_sample callback: RuntimeError: exporter bug",
        ]
    lines = load_samples(out)
    # The server lines are all there; the link has none (no half-filled lines).
    assert [line["role"] for line in lines] == ["primary"] * 3
    assert [line["event"] for line in lines] == ["periodic", "transfer-start", "transfer-end"]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Sampler(Path("/nonexistent/x"), interval=0)
    sampler = Sampler(Path("/nonexistent/x"))
    with pytest.raises(ValueError, match="secondary"):
        sampler.watch("c", [Target("secondary", "knot", 1)], None, {})
    with pytest.raises(ValueError, match="mark event"):
        sampler.mark("periodic", 0)
    assert sampler.mark("transfer-start", 0) == []  # nothing watched: nothing sampled


def test_the_file_is_appended_to(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"
    out.write_text(json.dumps({"t": 1.0, "case": "old", "role": "link"}) + "\n")
    with Sampler(out, interval=60) as sampler:
        sampler.watch("new", [Target("primary", "knot", os.getpid())], None, {"primary": (1, 2)})
    assert [line["case"] for line in load_samples(out)] == ["old", "new"]


# --- link counters --------------------------------------------------------------------


def test_linkem_counters() -> None:
    assert normalize_link_counters(LINKEM) == {"forward": {"passed": 100, "dropped": 20}}


def test_linkem_fault_drops_count_as_dropped() -> None:
    # A faulted case: the link down, a cut connection, a fault's rate limit and loss.
    faulted = {
        "forward": LINKEM["forward"]
        | {
            "dropped_down": 7,
            "dropped_cut": 2,
            "dropped_rate": 1,
            "dropped_fault": 3,
            "passed_bytes": 123_456,
            "state": {"down": True, "rate_bps": 0},
        }
    }
    assert normalize_link_counters(faulted) == {"forward": {"passed": 100, "dropped": 33}}


def test_netem_qdisc_counters() -> None:
    # The shape parse_tc_stats gives for a `qdisc netem` entry.
    netem = {
        "type": "qdisc",
        "kind": "netem",
        "handle": "1:",
        "bytes": 9000,
        "packets": 90,
        "drops": 7,
        "overlimits": 0,
        "requeues": 0,
    }
    assert normalize_link_counters({"forward": netem, "reverse": {}}) == {
        "forward": {"passed": 90, "dropped": 7}
    }


def test_rate_limited_directions_count_what_left_htb() -> None:
    htb = {"type": "class", "kind": "htb", "handle": "1:1", "packets": 80, "drops": 3}
    netem = {"kind": "netem", "packets": 85, "drops": 7, "htb": htb}
    linkem = {"passed": 90, "dropped_loss": 4, "dropped_overflow": 1, "htb": htb}
    rate_only: dict[str, Any] = {"htb": htb}
    assert normalize_link_counters({"forward": netem, "reverse": linkem, "other": rate_only}) == {
        # netem inside htb: its drops already hold the ones htb counted for it.
        "forward": {"passed": 80, "dropped": 7},
        # linkem before htb: both drop.
        "reverse": {"passed": 80, "dropped": 8},
        "other": {"passed": 80, "dropped": 3},
    }
    assert normalize_link_counters({}) == {}
