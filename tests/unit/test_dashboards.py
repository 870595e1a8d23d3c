"""The Grafana dashboard and its provisioning files, checked for structure.

Their PromQL runs against a real Prometheus fed by a real run in
tests/system/test_prometheus.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.metrics.exporter import FAMILIES

DASHBOARDS = Path(__file__).parent.parent.parent / "dashboards"
DATASOURCE_UID = "xfrbench-prometheus"
VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")


def dashboard() -> dict[str, Any]:
    return json.loads((DASHBOARDS / "xfrbench.json").read_text())


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' collapsed children included; rows themselves have no queries."""
    out = []
    for panel in board["panels"]:
        out.extend(panel.get("panels", []))
        if panel.get("type") != "row":
            out.append(panel)
    return out


def used_variables(text: str) -> set[str]:
    names = {a or b for a, b in VARIABLE.findall(text)}
    return {name for name in names if not name.startswith("__")}  # Grafana's built-ins


def variable_query(variable: dict[str, Any]) -> str:
    query = variable.get("query")
    return query.get("query", "") if isinstance(query, dict) else str(query or "")


def test_identity_and_schema() -> None:
    board = dashboard()
    assert board["uid"] == "xfrbench-transfers"
    assert 36 <= board["schemaVersion"] <= 41
    assert board["title"] and board.get("id") is None  # provisioning assigns the id


def test_every_panel_queries_the_provisioned_datasource() -> None:
    board = dashboard()
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    assert len(panels(board)) >= 8
    for panel in panels(board):
        assert panel["datasource"] == {"type": "prometheus", "uid": DATASOURCE_UID}, panel["title"]
        assert panel["title"] and panel.get("description"), panel["id"]
        targets = panel.get("targets") or []
        assert targets, f"panel {panel['title']!r} has no targets"
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in targets:
            assert target.get("expr", "").strip(), (panel["title"], target["refId"])
            assert target.get("datasource", panel["datasource"])["uid"] == DATASOURCE_UID
            assert 'run_id="$run_id"' in target["expr"], "every query is scoped to the run"


def test_grid_positions_fit_and_do_not_overlap() -> None:
    cells: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:
        grid = panel["gridPos"]
        assert {"x", "y", "w", "h"} <= set(grid) and grid["w"] > 0 and grid["h"] > 0
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, f"{panel['title']!r} overlaps another panel"
        cells |= mine


def test_variables_defined_and_used() -> None:
    board = dashboard()
    variables = board["templating"]["list"]
    defined = {v["name"] for v in variables}
    assert {"run_id", "case"} <= defined
    run_id = next(v for v in variables if v["name"] == "run_id")
    assert variable_query(run_id) == "label_values(xfrbench_run_info, run_id)"
    used: set[str] = set()
    for variable in variables:
        assert variable["datasource"]["uid"] == DATASOURCE_UID, variable["name"]
        used |= used_variables(variable_query(variable))
    for panel in panels(board):
        for target in panel["targets"]:
            used |= used_variables(target["expr"] + target.get("legendFormat", ""))
        used |= used_variables(panel["title"])
    assert used <= defined, f"undefined variables: {used - defined}"
    assert defined <= used, f"unused variables: {defined - used}"


def test_queries_name_only_metrics_the_exporter_exports() -> None:
    exported = set()
    for family in FAMILIES:
        if family.kind == "counter":
            exported.add(family.name + "_total")
        elif family.kind == "histogram":
            exported |= {family.name + s for s in ("_bucket", "_count", "_sum")}
        else:
            exported.add(family.name)
    text = json.dumps(dashboard())
    named = set(re.findall(r"\bxfrbench_[a-z_]+", text))
    assert named, "no metric names found"
    assert named <= exported, f"unknown metrics: {named - exported}"
    # The panels the issue asks for, by what they query.
    for needed in (
        "xfrbench_transfer_duration_seconds_bucket",
        "xfrbench_transfer_throughput_bytes_per_second",
        "xfrbench_transfer_bound_bytes_per_second",
        "xfrbench_server_cpu_seconds_total",
        "xfrbench_server_memory_rss_bytes",
        "xfrbench_tcp_time_wait_sockets",
        "xfrbench_tcp_retransmitted_segments_total",
        "xfrbench_link_packets_total",
    ):
        assert needed in named, needed


def test_provisioning_points_at_the_datasource_uid_and_dashboard_folder() -> None:
    datasource = (DASHBOARDS / "provisioning" / "datasources" / "prometheus.yml").read_text()
    assert re.search(rf"^\s+uid: {DATASOURCE_UID}$", datasource, re.M)
    assert re.search(r"^\s+type: prometheus$", datasource, re.M)
    assert re.search(r"^\s+url: http://prometheus:9090$", datasource, re.M)
    provider = (DASHBOARDS / "provisioning" / "dashboards" / "xfrbench.yml").read_text()
    assert re.search(r"^\s+type: file$", provider, re.M)
    assert re.search(r"^\s+path: /var/lib/grafana/dashboards/xfrbench$", provider, re.M)
    for text in (datasource, provider):
        assert re.search(r"^apiVersion: 1$", text, re.M)
        assert "\t" not in text  # YAML forbids tabs for indentation
