"""Per-case resource summary on synthetic samples with answers worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import UserInputError
from harness.results.resources import counter_delta, load_samples, summarize_resources


def server(
    t: float,
    event: str,
    repeat: int | None,
    user: float,
    system: float,
    *,
    role: str = "secondary",
    case: str = "c1",
    pid: int = 100,
    source: str = "cgroup-v1",
    anon: int = 1000,
    peak: int | None = 1500,
    tw: int = 0,
    ports: int = 0,
    retrans: int = 0,
    timeouts: int = 0,
) -> dict[str, Any]:
    return {
        "t": t,
        "event": event,
        "case": case,
        "repeat": repeat,
        "role": role,
        "server": "knot",
        "pid": pid,
        "source": source,
        "cpu_user_s": user,
        "cpu_system_s": system,
        "anon_bytes": anon,
        "charged_bytes": None,
        "charged_peak_bytes": peak,
        "tcp": {"inuse": 1, "orphan": 0, "time_wait": tw, "alloc": 3},
        "tcp_states": {"time_wait": tw} if tw else {},
        "ephemeral_ports_in_use": ports,
        "retrans_segs": retrans,
        "tcp_timeouts": timeouts,
        "active_opens": 0,
        "passive_opens": 0,
    }


def link(t: float, direction: str, passed: int, dropped: int, case: str = "c1") -> dict:
    return {
        "t": t,
        "event": "periodic",
        "case": case,
        "repeat": None,
        "role": "link",
        "direction": direction,
        "passed": passed,
        "dropped": dropped,
    }


def three_transfers() -> list[dict[str, Any]]:
    """Transfers using (user, system) = (0.2, 0.1), (0.4, 0.1), (0.3, 0.3) CPU seconds."""
    return [
        server(0.0, "periodic", None, 1.0, 0.5, tw=2, retrans=10, timeouts=1),
        server(1.0, "transfer-start", 0, 1.0, 0.5, retrans=10, timeouts=1),
        server(
            1.5,
            "periodic",
            0,
            1.1,
            0.55,
            tw=40,
            ports=12,
            retrans=14,
            timeouts=1,
            anon=3000,
            peak=4000,
        ),
        server(2.0, "transfer-end", 0, 1.2, 0.6, tw=30, retrans=15, timeouts=1),
        server(3.0, "transfer-start", 1, 1.2, 0.6, retrans=15, timeouts=1),
        server(4.0, "transfer-end", 1, 1.6, 0.7, tw=55, ports=20, retrans=15, timeouts=2),
        server(5.0, "transfer-start", 2, 1.6, 0.7, retrans=15, timeouts=2),
        server(6.0, "transfer-end", 2, 1.9, 1.0, tw=10, retrans=18, timeouts=2),
        server(7.0, "periodic", None, 2.0, 1.0, tw=10, retrans=18, timeouts=2),
        link(0.0, "forward", 100, 1),
        link(7.0, "forward", 1100, 6),
        link(0.0, "reverse", 50, 0),
        link(7.0, "reverse", 650, 0),
    ]


def test_summary_known_answers() -> None:
    summary = summarize_resources(three_transfers())
    assert summary == {
        "c1": {
            "secondary": {
                # medians: user of (0.2, 0.4, 0.3), system of (0.1, 0.1, 0.3),
                # total of (0.3, 0.5, 0.6)
                "cpu_s_per_transfer": {"user": 0.3, "system": 0.1, "total": 0.5},
                "cpu_s_total": 1.5,  # (2.0 + 1.0) - (1.0 + 0.5)
                "cpu_resolution_s": 1e-6,  # cgroup lines
                "anon_peak_bytes": 3000,
                "charged_peak_bytes": 4000,
                # each transfer's highest anon_bytes, marks included: 3000, 1000, 1000
                "memory_peak_per_transfer_bytes": 1000,
                "charged_peak_per_transfer_bytes": None,  # no end mark carries one
                "namespace_time_wait_peak": 55,
                "peak_ephemeral_ports": 20,
                "retrans_segs": 8,
                "tcp_timeouts": 1,
                # no records given: no socket figure
                "connections_per_transfer": None,
                "time_wait_left_per_transfer": None,
                "harness_connections_per_transfer": None,
            },
            "link": {
                "forward": {"passed": 1000, "dropped": 5},
                "reverse": {"passed": 600, "dropped": 0},
            },
        }
    }


def test_memory_is_an_anonymous_peak_per_case_beside_the_charged_peak_since_start() -> None:
    # Two cases served by the same processes (a group on one testbed): each case's anonymous
    # peak is its own samples'; the kernel's charged peak (page cache, since the start) is
    # the servers', the same for both, and never stands in for the anonymous one.
    mib = 1 << 20
    lines = [
        server(0.0, "periodic", None, 1.0, 0.5, case="a", anon=10 * mib, peak=500 * mib),
        server(1.0, "periodic", None, 1.0, 0.5, case="a", anon=30 * mib, peak=500 * mib),
        server(2.0, "periodic", None, 1.0, 0.5, case="b", anon=25 * mib, peak=500 * mib),
        server(3.0, "periodic", None, 1.0, 0.5, case="b", anon=20 * mib, peak=500 * mib),
    ]
    summary = summarize_resources(lines)
    assert summary["a"]["secondary"]["anon_peak_bytes"] == 30 * mib
    assert summary["b"]["secondary"]["anon_peak_bytes"] == 25 * mib
    assert {summary[c]["secondary"]["charged_peak_bytes"] for c in "ab"} == {500 * mib}
    assert "peak_rss_bytes" not in summary["a"]["secondary"]
    proc = [server(0.0, "periodic", None, 1.0, 0.5, source="proc", anon=7, peak=None)]
    assert summarize_resources(proc)["c1"]["secondary"]["charged_peak_bytes"] is None


def test_samples_written_before_the_rename_load_with_the_names_of_now(tmp_path: Path) -> None:
    old = {"t": 1.0, "event": "periodic", "case": "c1", "repeat": None, "role": "secondary",
           "server": "knot", "pid": 1, "cpu_user_s": 0.0, "cpu_system_s": 0.0}  # fmt: skip
    path = tmp_path / "samples.jsonl"
    lines = [
        old | {"source": "cgroup-v1", "rss_bytes": 5, "peak_rss_bytes": 9, "memory_bytes": 7},
        # /proc's VmRSS and VmHWM counted resident file pages: neither figure of today.
        old | {"source": "proc", "rss_bytes": 5, "peak_rss_bytes": 9, "memory_bytes": None},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cgroup_line, proc_line = load_samples(path)
    assert {k: cgroup_line[k] for k in ("anon_bytes", "charged_bytes", "charged_peak_bytes")} == {
        "anon_bytes": 5, "charged_bytes": 7, "charged_peak_bytes": 9
    }  # fmt: skip
    assert [proc_line[k] for k in ("anon_bytes", "charged_bytes", "charged_peak_bytes")] == [
        None, None, None
    ]  # fmt: skip
    assert not {"rss_bytes", "peak_rss_bytes", "memory_bytes"} & (set(cgroup_line) | set(proc_line))


def test_cases_and_roles_are_kept_apart_and_order_does_not_matter() -> None:
    lines = three_transfers()
    lines += [
        server(8.0, "periodic", None, 5.0, 5.0, role="primary", case="c2", tw=3),
        server(9.0, "transfer-start", 0, 5.0, 5.0, role="primary", case="c2"),
        server(9.5, "transfer-end", 0, 5.5, 5.25, role="primary", case="c2", tw=9),
        {"t": 9.6, "event": "periodic", "case": "c2", "role": "primary", "error": "boom"},
    ]
    summary = summarize_resources(reversed(lines))
    assert set(summary) == {"c1", "c2"}
    assert summary["c1"] == summarize_resources(three_transfers())["c1"]
    c2 = summary["c2"]
    assert set(c2) == {"primary", "link"} and c2["link"] == {}
    assert c2["primary"]["cpu_s_per_transfer"] == {"user": 0.5, "system": 0.25, "total": 0.75}
    assert c2["primary"]["cpu_s_total"] == 0.75
    assert c2["primary"]["namespace_time_wait_peak"] == 9


def test_no_marks_gives_no_per_transfer_figure() -> None:
    lines = [server(0, "periodic", None, 1, 1), server(1, "periodic", None, 2, 1)]
    figures = summarize_resources(lines)["c1"]["secondary"]
    assert figures["cpu_s_per_transfer"] == {"user": None, "system": None, "total": None}
    assert figures["cpu_s_total"] == 1.0


def test_a_restarted_server_counts_from_zero_never_negative() -> None:
    # A restarted server has a new pid (and a new cgroup): its CPU starts again from zero.
    lines = [
        server(0, "periodic", None, 3.0, 1.0, source="proc", pid=1),
        server(1, "periodic", None, 4.0, 1.0, source="proc", pid=1),  # +1.0
        server(2, "periodic", None, 0.1, 0.0, source="proc", pid=2),  # new process: +0.1
        server(3, "periodic", None, 0.5, 0.1, source="proc", pid=2),  # +0.5
        # a transfer whose marks straddle a restart is not measured
        server(4, "transfer-start", 0, 0.5, 0.1, source="proc", pid=2),
        server(5, "transfer-end", 0, 0.2, 0.5, source="proc", pid=3),  # new process: +0.7
    ]
    figures = summarize_resources(lines)["c1"]["secondary"]
    assert figures["cpu_s_total"] == 2.3
    assert figures["cpu_s_per_transfer"]["total"] is None
    cg = [server(0, "periodic", None, 1, 0, pid=1), server(1, "periodic", None, 2, 0, pid=2)]
    assert summarize_resources(cg)["c1"]["secondary"]["cpu_s_total"] == 2.0


def test_counter_delta_across_resets() -> None:
    values = [{"v": v} for v in (5, 7, 2, 4, 4)]
    assert counter_delta(values, lambda s: s["v"]) == 6  # +2, reset to 2, +2, +0
    assert counter_delta([], lambda s: s["v"]) == 0
    assert counter_delta(values[:1], lambda s: s["v"]) == 0


def test_load_samples_tolerates_a_truncated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    good = [link(1.0, "forward", 1, 0), link(2.0, "forward", 2, 0)]
    text = "".join(json.dumps(line) + "\n" for line in good)
    path.write_text(text + '{"t": 3.0, "event": "peri')
    assert load_samples(path) == good
    path.write_text(text + "\n\n")
    assert load_samples(path) == good
    path.write_text('{"t": 1.0, "ev\n' + text)
    with pytest.raises(UserInputError, match="line 1 is not JSON"):
        load_samples(path)
    path.write_text("[1, 2]\n" + text)
    with pytest.raises(UserInputError, match="not a JSON object"):
        load_samples(path)


def test_a_fleets_secondaries_are_summarized_per_host_and_links_per_direction() -> None:
    def at(host: str, site: str | None, **kwargs: Any) -> dict[str, Any]:
        line = server(**kwargs)
        return line | {"host": host, **({"site": site} if site else {})}

    lines = [
        # Two secondaries' lines interleave in time; each is its own process.
        at("seoul-1", "seoul", t=0, event="periodic", repeat=None, user=1.0, system=0, pid=1),
        at("seoul-2", "seoul", t=0, event="periodic", repeat=None, user=5.0, system=0, pid=2),
        at("seoul-1", "seoul", t=1, event="periodic", repeat=None, user=1.5, system=0, pid=1),
        at("seoul-2", "seoul", t=1, event="periodic", repeat=None, user=5.2, system=0, pid=2),
        at("primary", None, t=0, event="periodic", repeat=None, user=0, system=0, role="primary"),
        at("primary", None, t=1, event="periodic", repeat=None, user=1, system=0, role="primary"),
        link(0, "forward", 10, 0) | {"host": "seoul-1"},
        link(1, "forward", 30, 1) | {"host": "seoul-1"},
        link(0, "forward", 50, 0) | {"host": "uplink"},
        link(1, "forward", 90, 0) | {"host": "uplink"},
    ]
    summary = summarize_resources(lines)["c1"]
    assert list(summary) == ["primary", "seoul-1", "seoul-2", "link"]
    assert summary["seoul-1"]["cpu_s_total"] == 0.5
    assert summary["seoul-2"]["cpu_s_total"] == pytest.approx(0.2)
    assert (summary["seoul-1"]["role"], summary["seoul-1"]["site"]) == ("secondary", "seoul")
    assert "role" not in summary["primary"]  # a role's own key says it
    assert summary["link"] == {
        "seoul-1 forward": {"passed": 20, "dropped": 1},
        "uplink forward": {"passed": 40, "dropped": 0},
    }


def test_a_1_plus_1_run_keeps_its_role_keys_with_or_without_hosts() -> None:
    named = [
        line | {"host": line["role"]} if line["role"] != "link" else line
        for line in three_transfers()
    ]
    assert summarize_resources(named) == summarize_resources(three_transfers())
