"""compare and the report on catalog runs made by the fake flow: one value per repeat and
consumer, each phase's p95 and last apart, a slower consumer a regression and the other
not; the terminal summary's and report.html's catalog tables."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from harness.compare.gate import NO_CHANGE, REGRESSION, load_and_compare
from harness.measure.catalog import catalog_repeat
from harness.measure.records import RecordContext
from harness.metrics.openmetrics import write_openmetrics
from harness.report.data import load_report_data
from harness.report.html import render_html
from harness.report.text import print_summary
from harness.results import RunStore, TransferRecord
from tests.unit.test_catalog_flow import FakeCatalogBench, _linear, _plan
from tests.unit.test_report import RUN_META

JITTER = (1.0, 1.03, 0.98, 1.01, 0.99, 1.02)


def catalog_run(root: Path, name: str, k_step: float, more: str = "") -> Path:
    plan = _plan(root, "members = 20\nadd = 1\nremove = 0\n" + more)
    records: list[TransferRecord] = []
    for repeat in range(1, 7):
        factor = JITTER[repeat - 1]
        bench = FakeCatalogBench(
            plan, member_s={"b": _linear(0.1 * factor), "k": _linear(k_step * factor)}
        )
        catalog_repeat(bench, RecordContext(name, plan), repeat, records.append, {})
    with RunStore.create(root / "results", name, None, dict(RUN_META)) as store:
        for record in records:
            store.append(record)
    return store.folder


def test_a_slower_consumer_is_a_regression_of_its_p95_per_phase(tmp_path: Path) -> None:
    a = catalog_run(tmp_path, "a", k_step=0.01)
    b = catalog_run(tmp_path, "b", k_step=0.05)
    result = load_and_compare(a, b)
    got = {item.label: item for item in result.cases if item.figure.startswith("catalog")}
    case = next(iter(got.values())).case
    slower = got[f"{case} @ k: catalog p95, provision"]
    assert (slower.a.n, slower.b.n) == (6, 6)  # one value per repeat, never per member
    assert slower.verdict == REGRESSION
    assert got[f"{case} @ b: catalog p95, provision"].verdict == NO_CHANGE
    assert f"{case} @ k: catalog last, add" in got
    assert f"{case} @ k: catalog CPU per change" in got
    assert result.exit_status == 1


def test_a_zone_change_and_each_version_are_figures_of_their_own(tmp_path: Path) -> None:
    more = "versions = 2\nchange = 'zone'"
    a = catalog_run(tmp_path, "a", k_step=0.01, more=more)
    b = catalog_run(tmp_path, "b", k_step=0.01, more=more)
    figures = {item.label for item in load_and_compare(a, b).cases}
    case = next(label for label in figures if " @ " in label).split(" @ ")[0]
    for figure in ("catalog CPU per change", "catalog CPU per change, add 2",
                   "catalog CPU per change, change", "catalog p95, change",
                   "catalog last, add 2"):  # fmt: skip
        assert f"{case} @ k: {figure}" in figures, figures


def test_the_report_shows_each_phase_per_consumer_and_for_all(tmp_path: Path) -> None:
    run = catalog_run(tmp_path, "a", k_step=0.01)
    data = load_report_data(run)
    out = io.StringIO()
    print_summary(data, Console(file=out, width=200))
    text = out.getvalue()
    assert "Catalog zones: provisioning latency per member" in text
    assert data.screen.question == "catalog" and data.screen.shown[0] == "catalog"
    # the catalog's answer leads, before the cases table
    assert text.index("Catalog zones: provisioning") < text.index("cases (ok =")
    assert "What each transport costs (a catalog run compares no transports)" in text
    # 6 repeats x 20 members x 2 consumers, pooled; then the one-member add per repeat.
    assert re.search(r"provision\s+│\s+all\s+│\s+240 of 240", text), text
    assert re.search(r"add\s+│\s+k\s+│\s+6 of 6", text), text
    html = render_html(data)
    assert html.count('data-phase="provision"') == 3  # b, k and all
    assert 'href="#catalog"' in html


def test_openmetrics_of_a_catalog_fleet_run_has_no_propagation_figure(tmp_path: Path) -> None:
    run = catalog_run(tmp_path, "a", k_step=0.01)
    write_openmetrics(run)  # the run's records are a fleet's (two consumers)
    text = (run / "metrics.om").read_text()
    assert "xfrbench_fleet_propagation_seconds{" not in text
