"""A real Prometheus scrapes a real run; the dashboards' PromQL runs against what it stored;
the run's metrics.om backfills another Prometheus with the same figures."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness import spec
from harness.metrics.promserver import PROMETHEUS, PrometheusServer, free_port
from harness.metrics.resources import load_samples
from harness.results.meta import RunMeta
from harness.results.model import TransferRecord
from harness.results.store import load_run
from harness.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
    pytest.mark.skipif(not PROMETHEUS.exists(), reason="needs Debian's prometheus"),
]

DASHBOARD = Path(__file__).parent.parent.parent / "dashboards" / "xfrbench.json"
SCRAPE = 0.25  # seconds: the run is short
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


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScrapedRun]:
    root = tmp_path_factory.mktemp("prometheus")
    port = free_port()  # the run's exporter will listen here; Prometheus scrapes it
    with PrometheusServer([f"127.0.0.1:{port}"], root / "prom", scrape_interval=SCRAPE) as prom:
        prom.wait_for_targets()  # else the first seconds of the run go unscraped
        (root / "scenario.toml").write_text(SCENARIO)
        start = time.time()
        run_dir = run_scenario(
            spec.load(root / "scenario.toml"),
            results_root=root / "results",
            prometheus_port=port,
            sample_interval=SCRAPE,
        )
        end = time.time()
        meta, records = load_run(run_dir)
        assert len(records) == REPEATS, [r.error for r in records]
        assert all(r.counts for r in records), [r.error for r in records]
        yield ScrapedRun(prom, run_dir, meta, records, start, end)


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
    assert labels["method"] == "server-to-server" and labels["job"] == "xfrbench"
    assert 0 < max(values(durations)) <= REPEATS

    ok = scraped.range(f'xfrbench_transfers_total{{run_id="{run_id}",result="ok"}}')
    assert 1 <= max(values(ok)) <= REPEATS

    cpu = scraped.range(f'xfrbench_server_cpu_seconds_total{{run_id="{run_id}",role="secondary"}}')
    assert {s["metric"]["mode"] for s in cpu} == {"user", "system"}
    assert {s["metric"]["server"] for s in cpu} == {"bind"}
    assert all(s["metric"]["case"] == case for s in cpu)
    assert max(values(cpu)) > 0  # BIND spends CPU starting up

    time_wait = scraped.range(f'xfrbench_tcp_time_wait_sockets{{run_id="{run_id}"}}')
    assert {s["metric"]["role"] for s in time_wait} == {"primary", "secondary"}
    assert all(v >= 0 for v in values(time_wait))

    info = scraped.range(f'xfrbench_run_info{{run_id="{run_id}"}}')
    assert info and info[0]["metric"]["spec_hash"] == scraped.meta.spec_hash


def grafana_expr(expr: str, run_id: str) -> str:
    """What Grafana sends for a panel query: variables and built-ins substituted."""
    rate_interval = max(STEP + SCRAPE, 4 * SCRAPE)  # Grafana's $__rate_interval
    return (
        expr.replace("$run_id", run_id)
        .replace("$case", ".*")  # the "All" value
        .replace("$__rate_interval", f"{round(rate_interval * 1000)}ms")
        .replace("$__interval", f"{round(STEP * 1000)}ms")
    )


def test_every_dashboard_query_returns_data_for_the_run(scraped: ScrapedRun) -> None:
    board = json.loads(DASHBOARD.read_text())
    run_id = scraped.run_id
    # The variables' queries, as Grafana resolves label_values().
    assert run_id in scraped.prom.label_values(
        "run_id", "xfrbench_run_info", scraped.start, scraped.end
    )
    assert scraped.records[0].case in scraped.prom.label_values(
        "case", f'xfrbench_transfers_total{{run_id="{run_id}"}}', scraped.start, scraped.end
    )
    # Readings the contract allows to be null (no cgroup, process-tree fallback) may leave a
    # query empty, but only when the run's samples never had them.
    samples = load_samples(scraped.run_dir / "samples.jsonl")
    nullable = {
        "xfrbench_server_memory_bytes": "memory_bytes",
        "xfrbench_server_memory_peak_bytes": "peak_rss_bytes",
    }
    never_read = {
        metric
        for metric, key in nullable.items()
        if not any(s.get(key) is not None for s in samples if s["role"] != "link")
    }
    empty = []
    for panel in board["panels"]:
        for target in panel["targets"]:
            expr = grafana_expr(target["expr"], run_id)
            assert "$" not in expr, expr
            if any(metric in expr for metric in never_read):
                continue
            if not any(math.isfinite(v) for v in values(scraped.range(expr))):
                empty.append(f"{panel['title']} / {target['refId']}: {expr}")
    assert not empty, "panels without data:\n" + "\n".join(empty)


def test_metrics_om_backfills_a_prometheus_with_the_runs_figures(
    scraped: ScrapedRun, tmp_path: Path
) -> None:
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    om = scraped.run_dir / "metrics.om"
    assert om.exists()
    workdir = tmp_path / "backfill"
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(om), str(workdir / "data")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
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
