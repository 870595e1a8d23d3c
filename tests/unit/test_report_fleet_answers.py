"""The report's fleet section on a synthetic fleet run folder: every expected figure is
computed here from the records the folder holds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.report.data import load_report_data
from harness.report.html import render_html
from harness.results import RunStore
from tests.unit.test_report_answers import (
    META,
    Tables,
    case_meta,
    direction,
    record,
    write_cases,
)

# --- fleets -------------------------------------------------------------------------------

SAMPLE = {  # a primary's sample (harness/observe/sampler.py), the figures not used zero
    "role": "primary", "server": "bind", "pid": 1, "source": "cgroup-v2", "cpu_system_s": 0.0,
    "anon_bytes": 1 << 24, "charged_bytes": None, "charged_peak_bytes": None,
    "tcp": {"inuse": 1, "orphan": 0, "time_wait": 0, "alloc": 1},
    "ephemeral_ports_in_use": 0, "retrans_segs": 0, "tcp_timeouts": 0, "active_opens": 0,
    "passive_opens": 0,
}  # fmt: skip
FLEET_SITES = {"near": 0.002, "far": 0.100}  # site -> configured path RTT
FLEETS = {"bind-bind/count=1/tcp/axfr": 1, "bind-bind/count=3/tcp/axfr": 3}


def fleet_duration(site: str, index: int, repeat: int, size: int) -> float:
    return (0.05 if site == "near" else 0.4) + 0.01 * index + 0.003 * repeat + 0.002 * size


LOST_WORDS = (
    "2026-11-25T16:23:14+0000 info: [tld.] refresh, address 10.0.0.2@53, failed (timed out)"
)


def lost_record(name: str, case: str, repeat: int, host: str, site: str) -> Any:
    """A secondary that never served: a timeout, with its NOTIFY seen and its log's words."""
    return record(
        name, case, repeat, None, host=host, site=site, unsupported=False, failure="timeout",
        error=f"timeout after 20 s: the {host} never served tld. serial {2 + repeat}",
        phases={"notify_sent": 0.001},
        server_logged={"secondary_failures": {"timed_out": 1, "first_failure_line": LOST_WORDS}},
    )  # fmt: skip


def make_fleet_run(root: Path, name: str = "f1", lost: tuple[str, int, str] | None = None) -> Path:
    """`lost`: (case, repeat, host) of a secondary that never served."""
    samples = []
    metas = []
    with RunStore.create(root, name, None, META) as store:
        for case, per_site in FLEETS.items():
            hosts = {}
            for repeat in (1, 2, 3):
                for site in FLEET_SITES:
                    for index in range(1, per_site + 1):
                        host = f"{site}-{index}"
                        hosts[host] = site
                        duration = fleet_duration(site, index, repeat, per_site)
                        if lost == (case, repeat, host):
                            store.append(lost_record(name, case, repeat, host, site))
                            continue
                        store.append(
                            record(
                                name, case, repeat, duration,
                                phases={"notify_sent": 0.01 * index, "soa_query": 0.01,
                                        "connect": 0.02, "served": duration},
                                host=host, site=site,
                                extra={"path_rtt_s": FLEET_SITES[site],
                                       "tcp": {"rtt_ms_min": 1000 * FLEET_SITES[site] + 0.3}},
                            )
                        )  # fmt: skip
                t = 100.0 * repeat + 10 * per_site
                marks = (
                    ("transfer-start", 1.0, 0),
                    ("transfer-end", 1.0 + 0.01 * per_site * repeat, 50_000 * per_site),
                )
                for event, cpu, sent in marks:
                    samples.append(
                        SAMPLE | {"t": t, "event": event, "case": case, "repeat": repeat,
                                  "cpu_user_s": cpu, "net_tx_bytes": sent,
                                  "tcp_states": {"established": per_site}}
                    )  # fmt: skip
                    t += 1
            links = {host: {"forward": direction(rtt / 2, 0.0), "reverse": direction(rtt / 2, 0.0)}
                     for host, rtt in ((h, FLEET_SITES[s]) for h, s in hosts.items())}  # fmt: skip
            metas.append(
                case_meta(case, "tcp", links, sites=hosts,
                          scenario={"secondaries": [{"name": s} for s in FLEET_SITES]})
            )  # fmt: skip
        (store.folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    write_cases(store.folder, metas)
    return store.folder


def test_fleet_section_numbers(tmp_path: Path) -> None:
    folder = make_fleet_run(tmp_path)
    data = load_report_data(folder)
    assert data.fleet is not None and data.fleet.source == "summary.json"
    small, large = data.fleet.cases
    assert (small.case, small.secondaries, large.secondaries) == (*list(FLEETS)[:1], 2, 6)
    # convergence: each secondary's fleet time (its duration + how much later its NOTIFY
    # left than the repeat's first), sorted, as a step of 1 / fleet size
    for repeat, steps in large.convergence():
        times = sorted(
            fleet_duration(site, index, repeat, 3) + 0.01 * (index - 1)
            for site in FLEET_SITES
            for index in (1, 2, 3)
        )
        assert [t for t, _ in steps] == pytest.approx(times, abs=1e-6)
        assert [f for _, f in steps] == pytest.approx([(i + 1) / 6 for i in range(6)])
    assert {r.last_site for r in large.repeats} == {"far"}
    assert {s.site for s in large.sites} == {"near", "far"}
    (growth,) = data.fleet.growth
    assert growth.group == "bind-bind/tcp/axfr"
    assert [p.secondaries for p in growth.points] == [2, 6]
    # the primary's CPU per repeat: 0.01 x per-site count x repeat; median over 3 repeats
    assert [p.cpu_s for p in growth.points] == pytest.approx([0.02, 0.06])
    assert [p.tx_bytes for p in growth.points] == [50_000, 150_000]
    # the first screen goes per site in a fleet
    assert {(p.case, p.site) for p in data.phases} == {(c, s) for c in FLEETS for s in FLEET_SITES}
    paths = {(c.case, c.path): c for c in data.links}
    assert paths[(list(FLEETS)[1], "far")].rtt_s == pytest.approx(0.100)
    assert paths[("all 2 cases", "near")].transfers == 3 * (1 + 3)
    # the same figures from the records when summary.json lacks them (an interrupted run)
    summary = json.loads((folder / "summary.json").read_text())
    del summary["fleet"]
    (folder / "summary.json").write_text(json.dumps(summary))
    again = load_report_data(folder)
    assert again.fleet is not None and again.fleet.source == "transfers.jsonl"
    assert again.fleet.cases == data.fleet.cases and again.fleet.growth == data.fleet.growth


def test_fleet_section_in_the_page_and_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_fleet_run(tmp_path)
    data = load_report_data(folder)
    page = render_html(data)
    parsed = Tables(page)
    tables = {name: parsed.rows(name) for name in parsed.tables}
    large = data.fleet.cases[1] if data.fleet else None
    assert large is not None
    rows = [(a, c) for a, c in tables["fleet-repeats"] if a.get("data-case") == large.case]
    lasts = [float(next(c for c, _ in cells if "last" in c["class"].split())["data-value"])
             for _, cells in rows]  # fmt: skip
    assert lasts == pytest.approx([r.last_s for r in large.repeats])
    sites = {a["data-site"] for a, _ in tables["fleet-sites"] if a.get("data-case") == large.case}
    assert sites == {"near", "far"}
    growth = [(a["data-case"], c) for a, c in tables["fleet-growth"]]
    assert [case for case, _ in growth] == list(FLEETS)
    series = json.loads(re.search(r'id="fig-convergence-series">(.*?)</script>', page).group(1))
    assert [len(r["steps"]) for r in series["cases"][1]["repeats"]] == [6, 6, 6]
    assert 'id="fig-fleet-cost"' in page and "far: delay 50ms" in page
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Fleet:" in out and "The primary as the fleet grows" in out and "far" in out
