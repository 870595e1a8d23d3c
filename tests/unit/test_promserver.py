"""The throwaway Prometheus's configuration: static targets and target files, as
Prometheus itself checks it (promtool)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.metrics.promserver import render_config
from harness.run.remote import prometheus_targets

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def test_static_targets_and_target_files_in_one_job() -> None:
    config = json.loads(render_config(["127.0.0.1:9100"], 0.5, ["/r/prometheus-targets/*.json"]))
    (job,) = config["scrape_configs"]
    assert job["static_configs"] == [{"targets": ["127.0.0.1:9100"]}]
    assert job["file_sd_configs"] == [
        {"files": ["/r/prometheus-targets/*.json"], "refresh_interval": "1s"}
    ]
    assert json.loads(render_config([], 1.0))["scrape_configs"] == []


def test_an_inventory_runs_targets_name_the_controller_and_each_host() -> None:
    targets = prometheus_targets(
        "127.0.0.1:9100", {"ns0": "198.18.0.2:9100", "ns1": "[2001:db8::1]:0"}
    )
    assert targets == [
        {"targets": ["127.0.0.1:9100"], "labels": {"xfrbench_host": "controller"}},
        {"targets": ["198.18.0.2:9100"], "labels": {"xfrbench_host": "ns0"}},
        {"targets": ["[2001:db8::1]:0"], "labels": {"xfrbench_host": "ns1"}},
    ]


@pytest.mark.skipif(not shutil.which(PROMTOOL), reason="promtool not installed (apt prometheus)")
def test_prometheus_accepts_the_configuration_and_the_targets(tmp_path: Path) -> None:
    targets = tmp_path / "prometheus-targets" / "lab.json"
    targets.parent.mkdir()
    targets.write_text(
        json.dumps(prometheus_targets("127.0.0.1:9100", {"ns1": "198.18.0.34:9100"}))
    )
    config = tmp_path / "prometheus.yml"
    config.write_text(render_config(["127.0.0.1:9187"], 0.25, [str(targets.parent / "*.json")]))
    done = subprocess.run(
        [PROMTOOL, "check", "config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr
