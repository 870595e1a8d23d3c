"""The Grafana dashboard and its provisioning files, checked for structure.

Their PromQL runs against a real Prometheus fed by a real run in
tests/system/test_prometheus.py.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

from harness.metrics.families import FAMILIES
from harness.results.store import new_run_id

DASHBOARDS = Path(__file__).parent.parent.parent / "dashboards"
PROVISIONED_UID = "xfrbench-prometheus"  # compose's datasource; the dashboard never pins it
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
LOG_UNITS = {"s", "bps"}  # durations and throughput span decades: log axes


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


def test_every_panel_queries_the_datasource_variable() -> None:
    board = dashboard()
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    assert len(panels(board)) >= 8
    for panel in panels(board):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["title"] and panel.get("description"), panel["id"]
        targets = panel.get("targets") or []
        assert targets, f"panel {panel['title']!r} has no targets"
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in targets:
            assert target.get("expr", "").strip(), (panel["title"], target["refId"])
            assert target.get("datasource", panel["datasource"]) == DATASOURCE
            assert 'run_id="$run_id"' in target["expr"], "every query is scoped to the run"


def test_importable_into_any_grafana_no_pinned_datasource() -> None:
    board = dashboard()
    text = json.dumps(board)
    assert PROVISIONED_UID not in text  # another Grafana has no datasource of that uid
    assert "__inputs" not in board  # nothing to map on import: the variable picks one
    variables = {v["name"]: v for v in board["templating"]["list"]}
    source = variables["datasource"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    refs = list(datasource_refs(board))
    assert len(refs) > len(panels(board)) and all(ref == DATASOURCE for ref in refs), refs


def datasource_refs(node: Any) -> Any:
    """Every "datasource" object anywhere in the dashboard."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource" and isinstance(value, dict):
                yield value
            else:
                yield from datasource_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from datasource_refs(item)


def test_default_time_range_reaches_back_to_runs_back_filled_weeks_later() -> None:
    board = dashboard()
    assert board["time"]["to"] == "now"
    match = re.fullmatch(r"now-(\d+)d", board["time"]["from"])
    assert match and int(match.group(1)) >= 7, board["time"]
    # The run variable lists the runs in that range, newest first (a run id starts with its
    # UTC start time), and the dashboard opens on the newest.
    run_id = next(v for v in board["templating"]["list"] if v["name"] == "run_id")
    assert run_id["refresh"] == 2 and run_id["sort"] == 2 and not run_id["current"]
    old = new_run_id(datetime.datetime(2024, 12, 31, 23, 59, tzinfo=datetime.UTC))
    new = new_run_id(datetime.datetime(2025, 1, 1, 0, 0, tzinfo=datetime.UTC))
    assert sorted([old, new], reverse=True) == [new, old]
    # The run's span is marked on every graph, to zoom into by dragging over it.
    notes = {note["name"]: note for note in board["annotations"]["list"]}
    assert set(notes) == {"run", "faults"}
    annotation = notes["run"]
    assert 'xfrbench_run_info{run_id="$run_id"}' in annotation["expr"] and annotation["enable"]
    # A fault's window too, on every graph, named by its fault (the Faults row's first panel).
    faults = notes["faults"]
    assert "xfrbench_fault_active{" in faults["expr"] and faults["expr"].endswith("> 0")
    assert faults["titleFormat"] == "fault {{fault}}" and faults["enable"]
    # Gauges are read with max_over_time over the rate window: at a coarse step a short
    # back-filled run's points fall between the steps a bare selector would look at.
    exprs = [t["expr"] for p in panels(board) for t in p["targets"]]
    exprs += [note["expr"] for note in notes.values()]
    for expr in exprs:
        for name in re.findall(r"\bxfrbench_[a-z_]+", expr):
            if not name.endswith(("_total", "_bucket")):
                assert f"max_over_time({name}{{" in expr and "[$__rate_interval]" in expr, expr


def test_durations_and_throughput_on_log_axes() -> None:
    for panel in panels(dashboard()):
        defaults = panel["fieldConfig"]["defaults"]
        scale = defaults.get("custom", {}).get("scaleDistribution", {})
        if defaults["unit"] in LOG_UNITS:
            assert scale == {"type": "log", "log": 10}, panel["title"]


def row_queries(board: dict[str, Any], title: str) -> str:
    """The queries of the panels under the row `title`, up to the next row."""
    items = board["panels"]
    start = next(i for i, p in enumerate(items) if p["type"] == "row" and p["title"] == title)
    end = next((i for i in range(start + 1, len(items)) if items[i]["type"] == "row"), len(items))
    return " ".join(t["expr"] for p in items[start + 1 : end] for t in p["targets"])


def test_fleet_row_shows_propagation_sites_and_the_primarys_cost() -> None:
    board = dashboard()
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert rows[-4:] == ["Fleet", "Stream", "Faults", "Catalog"]
    fleet = row_queries(board, "Fleet")
    assert "xfrbench_fleet_propagation_seconds" in fleet and '"p50|p95|last"' in fleet
    assert "sum by (le, case, site)" in fleet  # per-site durations from the histogram
    assert "xfrbench_fleet_secondaries" in fleet
    assert "xfrbench_fleet_refusals" in fleet  # counted in the primary's log
    for cost in ("cpu_seconds", "peak_connections", "transmit_bytes"):
        assert f"xfrbench_primary_repeat_{cost}" in fleet, cost


def test_stream_row_shows_each_secondarys_lag_and_each_sites_slowest() -> None:
    stream = row_queries(dashboard(), "Stream")
    assert "max by (case, site, host) (max_over_time(xfrbench_stream_behind_serials" in stream
    assert "max by (case, site, host) (max_over_time(xfrbench_stream_behind_seconds" in stream
    assert "max by (case, site) (max_over_time(xfrbench_stream_behind_seconds" in stream


def test_faults_row_shows_windows_heal_times_and_the_stuck() -> None:
    faults = row_queries(dashboard(), "Faults")
    assert "max by (case, fault) (max_over_time(xfrbench_fault_active" in faults
    assert "max by (case, fault, host, site) (max_over_time(xfrbench_fault_heal_seconds" in faults
    assert "sum by (case, fault) (max_over_time(xfrbench_fault_stuck" in faults


def test_catalog_row_shows_each_consumers_members_served_and_behind() -> None:
    catalog = row_queries(dashboard(), "Catalog")
    assert "max by (case, site, host) (max_over_time(xfrbench_catalog_members_served" in catalog
    assert "max by (case, site, host) (max_over_time(xfrbench_catalog_members_behind" in catalog


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
    assert {"datasource", "run_id", "case"} <= defined
    run_id = next(v for v in variables if v["name"] == "run_id")
    assert variable_query(run_id) == "label_values(xfrbench_run_info, run_id)"
    used: set[str] = set()
    for variable in variables:
        if variable["type"] != "datasource":
            assert variable["datasource"] == DATASOURCE, variable["name"]
        used |= used_variables(variable_query(variable))
    for panel in panels(board):
        for target in panel["targets"]:
            used |= used_variables(target["expr"] + target.get("legendFormat", ""))
        used |= used_variables(panel["title"] + panel["datasource"]["uid"])
    for annotation in board["annotations"]["list"]:
        used |= used_variables(annotation["expr"] + annotation["datasource"]["uid"])
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
        "xfrbench_server_memory_anon_bytes",
        "xfrbench_tcp_time_wait_sockets",
        "xfrbench_tcp_retransmitted_segments_total",
        "xfrbench_link_packets_total",
        "xfrbench_link_loss_measured_ratio",
        "xfrbench_link_loss_configured_ratio",
        "xfrbench_network_transmit_bytes_total",
    ):
        assert needed in named, needed


def test_provisioning_points_at_the_datasource_and_dashboard_folder() -> None:
    datasource = (DASHBOARDS / "provisioning" / "datasources" / "prometheus.yml").read_text()
    assert re.search(rf"^\s+uid: {PROVISIONED_UID}$", datasource, re.M)
    # The dashboard's datasource variable starts on the default one: this one in compose.
    assert re.search(r"^\s+isDefault: true$", datasource, re.M)
    assert re.search(r"^\s+type: prometheus$", datasource, re.M)
    assert re.search(r"^\s+url: http://prometheus:9090$", datasource, re.M)
    provider = (DASHBOARDS / "provisioning" / "dashboards" / "xfrbench.yml").read_text()
    assert re.search(r"^\s+type: file$", provider, re.M)
    assert re.search(r"^\s+path: /var/lib/grafana/dashboards/xfrbench$", provider, re.M)
    for text in (datasource, provider):
        assert re.search(r"^apiVersion: 1$", text, re.M)
        assert "\t" not in text  # YAML forbids tabs for indentation


def test_hosts_are_shown_with_their_site() -> None:
    """A fleet's hosts are named as the inventory (or the plan) names them, and each is at
    a site: every series drawn per host is drawn per host and site, both in its legend."""
    per_host = 0
    for panel in panels(dashboard()):
        for target in panel["targets"]:
            for grouping in re.findall(r"by \(([^)]*)\)", target["expr"]):
                labels = {label.strip() for label in grouping.split(",")}
                if "host" in labels:
                    per_host += 1
                    assert "site" in labels, (panel["title"], target["expr"])
                    assert "{{host}} {{site}}" in target["legendFormat"], panel["title"]
    assert per_host >= 10  # transfers, servers and links
