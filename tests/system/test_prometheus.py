"""A real Prometheus scrapes real runs: a 1+1 run, a small fleet (two sites), a stream, a
fault run and a catalog (a BIND and a Knot consumer); the dashboard's PromQL runs against
what it stored; the runs' metrics.om files backfill another Prometheus, where the
dashboard, opened weeks later on its default time range, still shows them."""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import subprocess
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness import spec
from harness.metrics.promserver import PROMETHEUS, PrometheusServer, free_port
from harness.results.folder import read_run
from harness.results.meta import RunMeta
from harness.results.model import TransferRecord
from harness.results.resources import load_samples
from harness.run.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
    pytest.mark.skipif(not PROMETHEUS.exists(), reason="needs Debian's prometheus"),
    pytest.mark.xdist_group("prometheus"),  # its runs and their Prometheus, once (module fixtures)
]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboards" / "xfrbench.json"
SCRAPE = 0.25  # seconds: the runs are short
STEP = SCRAPE  # query_range step (Grafana's $__interval on a short time range)
# Three repeats: the 1 -> 2 step of the duration histogram happens while the run (and its
# exporter) surely goes on, so rate() over it is scraped on both sides.
REPEATS = 3
SCENARIO = f"""
repeats = {REPEATS}
timeout = "30s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "retransfer"
[zones]
preset = "tiny"
origin = "prom.example."
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[link]
delay = "5ms"
"""
# A change stream: two sites, the far one 50 ms away, 10 serials at 200 ms intervals.
STREAM = """
repeats = 1
timeout = "60s"
xfr = ["ixfr"]
trigger = "stream"
[zones]
preset = "tld"
records = 1000
origin = "prom-stream.example."
[servers.primary]
kind = "bind"
[[secondaries]]
name = "near"
kind = "bind"
[[secondaries]]
name = "far"
kind = "knot"
link = { delay = "50ms" }
[stream]
interval = "200ms"
updates = 10
"""
# A fault run: the link down for 1 s, 4 kB into the transfer (a 4 Mbit/s link keeps it going
# that long); TCP carries the transfer over the gap and the secondary heals. (A fault that
# restarts the primary leaves no primary cost for its repeat: its counters start over.)
FAULT = """
repeats = 1
passes = 1
timeout = "20s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 5000
origin = "prom-fault.example."
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[link]
delay = "5ms"
rate = "4mbit"
[[faults]]
kind = "link-down"
after_bytes = "4kB"
duration = "1s"
"""
# A catalog of 60 members at a BIND and a Knot consumer (5 ms away: the link panels have
# a link to show), one member added and one removed.
CATALOG = """
repeats = 1
timeout = "60s"
xfr = ["ixfr"]
trigger = "catalog"
[zones]
preset = "hosting"
origin = "prom-catalog.example."
[servers.primary]
kind = "bind"
[[secondaries]]
name = "berlin"
kind = "bind"
[[secondaries]]
name = "prague"
kind = "knot"
link = { delay = "5ms" }
[catalog]
members = 60
add = 1
remove = 1
interval = "1s"
sample = 2
"""
# Families a run fills only in a fleet, and only where a link has loss configured.
FLEET_ONLY = ("xfrbench_fleet_",)
LOSS_ONLY = ("xfrbench_link_loss_",)
STREAM_ONLY = ("xfrbench_stream_",)  # ...and only in a change stream
FAULT_ONLY = ("xfrbench_fault_",)  # ...and only in a fault run
CATALOG_ONLY = ("xfrbench_catalog_",)  # ...and only in a catalog run
# Families only some runs fill, checked absent from the others.
ONLY = (*FLEET_ONLY, *LOSS_ONLY, *STREAM_ONLY, *FAULT_ONLY, *CATALOG_ONLY)


@dataclass
class ScrapedRun:
    prom: PrometheusServer
    run_dir: Path
    meta: RunMeta
    records: list[TransferRecord]
    start: float
    end: float

    @property
    def run_id(self) -> str:
        return self.meta.run_id

    def range(self, promql: str) -> list[dict[str, Any]]:
        return self.prom.query_range(promql, self.start, self.end, STEP)


def small_fleet() -> spec.LoadedScenario:
    """scenarios/fleet.toml, small: Frankfurt (two secondaries, 1 ms) and Seoul (one, 50 ms
    and 1 % loss), a 3000-record zone, AXFR only."""
    path = ROOT / "scenarios" / "fleet.toml"
    raw = tomllib.loads(path.read_text())
    raw.setdefault("name", path.stem)
    raw |= {"repeats": REPEATS, "timeout": "120s", "xfr": ["axfr"]}
    raw["zones"] |= {"records": 3000, "ixfr_changes": 20}
    sites = {site["name"]: copy.deepcopy(site) for site in raw["secondaries"]}
    sites["seoul"]["link"] = {"delay": "25ms", "loss": "1%"}
    raw["secondaries"] = [sites["frankfurt"], sites["seoul"]]
    base, cases = spec.expand(raw, path)
    return spec.LoadedScenario(path, raw, base, spec.spec_hash(base), cases)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ScrapedRun]]:
    root = tmp_path_factory.mktemp("prometheus")
    (root / "scenario.toml").write_text(SCENARIO)
    (root / "stream.toml").write_text(STREAM)
    (root / "fault.toml").write_text(FAULT)
    (root / "catalog.toml").write_text(CATALOG)
    scenarios = {
        "single": spec.load(root / "scenario.toml"),
        "fleet": small_fleet(),
        "stream": spec.load(root / "stream.toml"),
        "fault": spec.load(root / "fault.toml"),
        "catalog": spec.load(root / "catalog.toml"),
    }
    ports = {name: free_port() for name in scenarios}  # each run's exporter listens there
    assert len(set(ports.values())) == len(ports)
    targets = [f"127.0.0.1:{port}" for port in ports.values()]
    with PrometheusServer(targets, root / "prom", scrape_interval=SCRAPE) as prom:
        prom.wait_for_targets()  # else the first seconds of a run go unscraped
        out = {}
        for name, loaded in scenarios.items():
            start = time.time()
            run_dir = run_scenario(
                loaded,
                results_root=root / "results",
                prometheus_port=ports[name],
                sample_interval=SCRAPE,
            )
            end = time.time()
            meta, records = read_run(run_dir)
            # A stream's serials before its last are served but unchecked, never failed.
            assert all(r.counts or r.unchecked for r in records), [r.error for r in records]
            out[name] = ScrapedRun(prom, run_dir, meta, records, start, end)
        assert len(out["single"].records) == REPEATS
        assert len(out["fleet"].records) == REPEATS * 3
        assert len(out["stream"].records) == 10 * 2
        (healed,) = out["fault"].records
        assert healed.extra["fault"]["heal_s"] is not None, healed.extra["fault"]
        assert len(out["catalog"].records) == 3 * 2  # provision, add, remove; two consumers
        yield out


@pytest.fixture(scope="module")
def scraped(runs: dict[str, ScrapedRun]) -> ScrapedRun:
    return runs["single"]


@pytest.fixture(scope="module")
def fleet(runs: dict[str, ScrapedRun]) -> ScrapedRun:
    return runs["fleet"]


def values(result: list[dict[str, Any]]) -> list[float]:
    return [float(v) for series in result for _, v in series.get("values", [])]


def test_transfer_cpu_and_time_wait_series_arrive_with_their_labels(scraped: ScrapedRun) -> None:
    run_id, case = scraped.run_id, scraped.records[0].case
    durations = scraped.range(
        f'xfrbench_transfer_duration_seconds_count{{run_id="{run_id}",case="{case}",'
        'transport="tcp",xfr="axfr"}'
    )
    assert durations, scraped.prom.targets()
    labels = durations[0]["metric"]
    assert labels["primary"] == "bind" and labels["secondary"] == "bind"
    assert (labels["host"], labels.get("site", "")) == ("secondary", "")  # "" is no label
    assert labels["method"] == "server-to-server" and labels["job"] == "xfrbench"
    assert 0 < max(values(durations)) <= REPEATS

    ok = scraped.range(f'xfrbench_transfers_total{{run_id="{run_id}",result="ok"}}')
    assert 1 <= max(values(ok)) <= REPEATS

    cpu = scraped.range(f'xfrbench_server_cpu_seconds_total{{run_id="{run_id}",role="secondary"}}')
    assert {s["metric"]["mode"] for s in cpu} == {"user", "system"}
    assert {s["metric"]["server"] for s in cpu} == {"bind"}
    assert {s["metric"]["host"] for s in cpu} == {"secondary"}
    assert all(s["metric"]["case"] == case for s in cpu)
    assert max(values(cpu)) > 0  # BIND spends CPU starting up

    time_wait = scraped.range(f'xfrbench_tcp_time_wait_sockets{{run_id="{run_id}"}}')
    assert {s["metric"]["role"] for s in time_wait} == {"primary", "secondary"}
    assert all(v >= 0 for v in values(time_wait))

    link = scraped.range(f'xfrbench_link_packets_total{{run_id="{run_id}"}}')
    assert {s["metric"]["host"] for s in link} == {"secondary"}  # the lone secondary's link

    info = scraped.range(f'xfrbench_run_info{{run_id="{run_id}"}}')
    assert info and info[0]["metric"]["spec_hash"] == scraped.meta.spec_hash


def test_a_fault_window_and_its_heal_time_arrive(runs: dict[str, ScrapedRun]) -> None:
    run = runs["fault"]
    (record,) = run.records
    fault = record.extra["fault"]
    active = run.range(f'xfrbench_fault_active{{run_id="{run.run_id}"}}')
    (series,) = active
    assert series["metric"]["fault"] == fault["name"] == "link-down"
    assert {float(v) for _, v in series["values"]} == {0.0, 1.0}  # it began, and it ended
    heal = run.range(f'xfrbench_fault_heal_seconds{{run_id="{run.run_id}"}}')
    assert float(heal[0]["values"][-1][1]) == pytest.approx(fault["heal_s"])
    stuck = run.range(f'xfrbench_fault_stuck{{run_id="{run.run_id}"}}')
    assert values(stuck) and max(values(stuck)) == 0


def test_a_fleets_servers_links_and_transfers_carry_host_and_site(fleet: ScrapedRun) -> None:
    run_id = fleet.run_id
    sites = {r.host: r.site for r in fleet.records}
    assert set(sites.values()) == {"frankfurt", "seoul"} and len(sites) == 3

    def hosts(promql: str) -> dict[str, str]:
        result = fleet.range(promql)
        return {s["metric"]["host"]: s["metric"].get("site", "") for s in result}

    cpu = hosts(f'xfrbench_server_cpu_seconds_total{{run_id="{run_id}",mode="user"}}')
    assert cpu == sites | {"primary": ""}  # every secondary its own series
    done = hosts(f'xfrbench_transfers_total{{run_id="{run_id}",result="ok"}} > 0')
    assert done == sites
    link = fleet.range(f'xfrbench_link_packets_total{{run_id="{run_id}",verdict="passed"}}')
    assert {s["metric"]["host"] for s in link} == set(sites)
    measured = fleet.range(f'xfrbench_link_loss_measured_ratio{{run_id="{run_id}"}}')
    assert {s["metric"]["host"] for s in measured} == {h for h, s in sites.items() if s == "seoul"}
    stats = fleet.range(f'xfrbench_fleet_propagation_seconds{{run_id="{run_id}"}}')
    latest = {s["metric"]["stat"]: float(s["values"][-1][1]) for s in stats}
    assert set(latest) == {"first", "p50", "p95", "last"}
    assert 0 < latest["first"] <= latest["p50"] <= latest["p95"] <= latest["last"]
    served = fleet.range(f'xfrbench_fleet_secondaries{{run_id="{run_id}",status="served"}}')
    assert max(values(served)) == len(sites)
    cost = fleet.range(f'xfrbench_primary_repeat_transmit_bytes{{run_id="{run_id}"}}')
    assert min(values(cost)) > 0  # the zone went out once per secondary


def test_a_catalogs_consumers_members_served_and_behind(runs: dict[str, ScrapedRun]) -> None:
    """Each consumer's members while it provisions them: behind falls to 0 as served rises to
    every member; the removal leaves it 0 behind too, once the member is gone."""
    run = runs["catalog"]

    def per_host(family: str) -> dict[str, list[float]]:
        result = run.range(f'{family}{{run_id="{run.run_id}"}}')
        return {s["metric"]["host"]: [float(v) for _, v in s["values"]] for s in result}

    served = per_host("xfrbench_catalog_members_served")
    behind = per_host("xfrbench_catalog_members_behind")
    assert set(served) == set(behind) == {"berlin", "prague"}
    for host in ("berlin", "prague"):
        assert max(served[host]) == 60  # every member the catalog named at the start
        assert all(0 <= v <= 60 for v in served[host])
        assert behind[host][-1] == 0  # the removed member is gone at the end
    # BIND's serial-query-rate (20 refreshes a second) paces 60 new members over ~3 s:
    # scraped every 0.25 s, some of them are seen behind.
    assert max(behind["berlin"]) > 0


def grafana_expr(expr: str, run_id: str, interval: float, scrape: float) -> str:
    """What Grafana sends for a panel query: variables and built-ins substituted."""
    rate_interval = max(interval + scrape, 4 * scrape)  # Grafana's $__rate_interval
    return (
        expr.replace("$run_id", run_id)
        .replace("$case", ".*")  # the "All" value
        .replace("$__rate_interval", f"{round(rate_interval * 1000)}ms")
        .replace("$__interval", f"{round(interval * 1000)}ms")
    )


def board_queries() -> list[tuple[dict[str, Any], str, str]]:
    """(panel, label, expr) of every panel query and of the annotations."""
    board = json.loads(DASHBOARD.read_text())
    out = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            out.append((panel, f"{panel['title']} / {target['refId']}", target["expr"]))
    for note in board["annotations"]["list"]:
        out.append(({"gridPos": {"w": 24}}, f"annotation {note['name']}", note["expr"]))
    return out


def never_read(run: ScrapedRun) -> set[str]:
    """Families a run leaves empty by design: readings the contract allows to be null (no
    cgroup, process-tree fallback) when its samples never had them, fleet figures outside a
    fleet (and in a stream or a catalog), loss checks where no link has loss configured, a
    stream's lag outside a stream, a catalog's members outside a catalog run, and throughput
    in either."""
    samples = load_samples(run.run_dir / "samples.jsonl")
    nullable = {
        "xfrbench_server_memory_anon_bytes": "anon_bytes",
        "xfrbench_server_memory_charged_bytes": "charged_bytes",
        "xfrbench_server_memory_charged_peak_bytes": "charged_peak_bytes",
    }
    out = {
        metric
        for metric, key in nullable.items()
        if not any(s.get(key) is not None for s in samples if s["role"] != "link")
    }
    # A stream's figures are per serial, a catalog's per phase and consumer, not per repeat.
    per_repeat = not all(r.trigger in ("stream", "catalog") for r in run.records)
    # (Format 2 holds a fleet's site in the record, no longer in extra.)
    if not any(r.site is not None for r in run.records) or not per_repeat:
        out |= set(FLEET_ONLY)
    if not per_repeat:  # its records are latencies, not transfers with sizes
        out.add("xfrbench_transfer_throughput_bytes_per_second")
    checks = [d for r in run.records for d in r.extra.get("link", {}).values() if "loss_check" in d]
    if not checks:
        out |= set(LOSS_ONLY)
    if not any(r.trigger == "stream" for r in run.records):
        out |= set(STREAM_ONLY)
    if not any("fault" in r.extra for r in run.records):
        out |= set(FAULT_ONLY)
    if not any(r.trigger == "catalog" for r in run.records):
        out |= set(CATALOG_ONLY)
    return out


def empty_panels(
    run: ScrapedRun, prom: PrometheusServer, start: float, end: float, step_of: Any, scrape: float
) -> tuple[list[str], list[str]]:
    """(queries without data that should have some, queries with data that should not)."""
    skip = never_read(run)
    empty, unexpected = [], []
    for panel, label, raw in board_queries():
        step = step_of(end - start, panel["gridPos"]["w"])
        expr = grafana_expr(raw, run.run_id, step, scrape)
        assert "$" not in expr, expr
        # Grafana aligns the range to the step.
        got = prom.query_range(expr, start - start % step, end - end % step + step, step)
        has_data = any(math.isfinite(v) for v in values(got))
        if any(family in expr for family in skip):
            if has_data and any(family in expr for family in ONLY):
                unexpected.append(f"{label}: {expr}")
        elif not has_data:
            empty.append(f"{label}: {expr}")
    return empty, unexpected


@pytest.mark.parametrize("name", ["single", "fleet", "stream", "fault", "catalog"])
def test_every_dashboard_query_returns_data_for_the_run(
    runs: dict[str, ScrapedRun], name: str
) -> None:
    run = runs[name]
    # The variables' queries, as Grafana resolves label_values().
    assert run.run_id in run.prom.label_values("run_id", "xfrbench_run_info", run.start, run.end)
    assert run.records[0].case in run.prom.label_values(
        "case", f'xfrbench_transfers_total{{run_id="{run.run_id}"}}', run.start, run.end
    )
    empty, unexpected = empty_panels(
        run, run.prom, run.start, run.end, lambda span, width: STEP, SCRAPE
    )
    assert not empty, "panels without data:\n" + "\n".join(empty)
    assert not unexpected, "panels with data they cannot have:\n" + "\n".join(unexpected)


def backfill(run: ScrapedRun, data: Path) -> None:
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    om = run.run_dir / "metrics.om"
    assert om.exists()
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(om), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_fleets_metrics_om_ends_with_its_summary_figures(
    fleet: ScrapedRun, tmp_path: Path
) -> None:
    """The back-filled fleet gauges hold the last repeat's figures as summary.json has them
    (the same functions compute both)."""
    workdir = tmp_path / "backfill"
    backfill(fleet, workdir / "data")
    summary = json.loads((fleet.run_dir / "summary.json").read_text())["fleet"]
    (case,) = summary
    last = summary[case]["repeats"][-1]
    cost = summary[case]["primary"][-1]
    at = fleet.end + 1
    with PrometheusServer([], workdir) as prom:

        def figures(family: str, label: str) -> dict[str, float]:
            query = f'last_over_time({family}{{run_id="{fleet.run_id}"}}[1h])'
            return {s["metric"].get(label, ""): float(s["value"][1]) for s in prom.query(query, at)}

        stats = figures("xfrbench_fleet_propagation_seconds", "stat")
        assert stats == pytest.approx({k: last[f"{k}_s"] for k in ("first", "p50", "p95", "last")})
        assert figures("xfrbench_fleet_secondaries", "status") == {
            "secondaries": last["secondaries"],
            "recorded": last["secondaries"],
            "served": last["served"],
            "reconnected": last["reconnected"],
            "possibly_waited": last["possibly_waited"],
        }
        # A BIND primary: its refusals counted in its log (none here), a series of its own.
        assert figures("xfrbench_fleet_refusals", "case") == {case: last["refusals"]}
        assert figures("xfrbench_primary_repeat_transmit_bytes", "case") == {case: cost["tx_bytes"]}
        assert figures("xfrbench_primary_repeat_cpu_seconds", "case") == pytest.approx(
            {case: cost["cpu_s"]}
        )
        assert figures("xfrbench_primary_repeat_peak_connections", "case") == {
            case: cost["peak_connections"]
        }


def test_metrics_om_backfills_a_prometheus_with_the_runs_figures(
    scraped: ScrapedRun, tmp_path: Path
) -> None:
    workdir = tmp_path / "backfill"
    backfill(scraped, workdir / "data")
    run_id = scraped.run_id
    last = max(r.started_at + (r.duration_s or 0) for r in scraped.records)
    with PrometheusServer([], workdir) as prom:
        ok = prom.query(f'xfrbench_transfers_total{{run_id="{run_id}",result="ok"}}', last + 1)
        assert [float(s["value"][1]) for s in ok] == [REPEATS]
        total = prom.query(
            f'sum(xfrbench_transfer_duration_seconds_sum{{run_id="{run_id}"}})', last + 1
        )
        expected = sum(r.duration_s or 0 for r in scraped.records)
        assert float(total[0]["value"][1]) == pytest.approx(expected)
        cpu = prom.query_range(
            f'xfrbench_server_cpu_seconds_total{{run_id="{run_id}"}}', scraped.start, last, STEP
        )
        assert {s["metric"]["role"] for s in cpu} == {"primary", "secondary"}


# Grafana's rangeutil.roundInterval (ms): the "nice" interval nearest a raw one.
NICE_MS = [
    (15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500), (1500, 1000),
    (3500, 2000), (7500, 5000), (12500, 10000), (17500, 15000), (25000, 20000),
    (45000, 30000), (90000, 60000), (210000, 120000), (450000, 300000), (750000, 600000),
    (1050000, 900000), (1500000, 1200000), (2700000, 1800000), (5400000, 3600000),
    (9000000, 7200000), (16200000, 10800000), (32400000, 21600000), (86400000, 43200000),
]  # fmt: skip
GRAFANA_SCRAPE = 15.0  # a Grafana datasource's default scrape interval, seconds
SCREEN_PX = 1920  # a panel's max data points: its width in pixels


def grafana_interval(span: float, width: int) -> float:
    """$__interval in seconds for a panel `width` grid units wide over `span` seconds."""
    raw_ms = span * 1000 / (SCREEN_PX * width / 24)
    nice = next((ms for below, ms in NICE_MS if raw_ms < below), 86400000)
    return max(nice / 1000, GRAFANA_SCRAPE)


def test_the_default_time_range_shows_back_filled_runs_weeks_later(
    runs: dict[str, ScrapedRun], tmp_path: Path
) -> None:
    """Both runs back-filled into a Prometheus that never scraped them, and the dashboard
    opened on its default time range as late as that range still covers them: its run
    variable lists them and every panel shows them (at a step of hours, not seconds)."""
    board = json.loads(DASHBOARD.read_text())
    assert board["time"]["to"] == "now" and board["time"]["from"].startswith("now-")
    days = int(board["time"]["from"].removeprefix("now-").removesuffix("d"))
    workdir = tmp_path / "backfill"
    for run in runs.values():
        backfill(run, workdir / "data")
    first = min(run.start for run in runs.values())
    now = first + (days - 1) * 86400  # a day before the oldest run leaves the range
    start = now - days * 86400
    with PrometheusServer([], workdir) as prom:
        listed = prom.label_values("run_id", "xfrbench_run_info", start, now)
        assert {run.run_id for run in runs.values()} <= set(listed)
        for name, run in runs.items():
            empty, unexpected = empty_panels(
                run, prom, start, now, grafana_interval, GRAFANA_SCRAPE
            )
            assert not empty, f"{name}: panels without data:\n" + "\n".join(empty)
            assert not unexpected, f"{name}: panels with data:\n" + "\n".join(unexpected)
