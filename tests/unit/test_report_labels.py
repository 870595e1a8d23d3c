"""A report shortens its case names once, so a case reads the same in every table and
figure (issue 19: each figure used to shorten its own subset of names)."""

from __future__ import annotations

import io
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from harness.core import fmt
from harness.report.data import load_report_data
from harness.report.figures import build_figures
from harness.report.html import render_html
from harness.report.text import print_summary

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"


def counting(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every call of short_labels, wherever a report module imported it from."""
    calls: list[list[str]] = []
    real = fmt.short_labels

    def counted(names: list[str]) -> tuple[str, dict[str, str]]:
        calls.append(list(names))
        return real(names)

    for name, module in list(sys.modules.items()):
        if name.startswith("harness.") and getattr(module, "short_labels", None) is real:
            monkeypatch.setattr(module, "short_labels", counted)
    return calls


@pytest.mark.parametrize("fixture", ["fleet-v1", "report-quick"])
def test_case_names_are_shortened_once_per_report(
    fixture: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = shutil.copytree(FIXTURES / fixture, tmp_path / fixture)
    calls = counting(monkeypatch)
    data = load_report_data(folder)
    render_html(data)
    print_summary(data, Console(file=io.StringIO(), width=160))
    # Once for the case names, once for the transport table's pairs.
    assert len(calls) <= 2, calls


def test_a_case_has_one_short_name_in_every_figure(tmp_path: Path) -> None:
    folder = shutil.copytree(FIXTURES / "fleet-v1", tmp_path / "fleet-v1")
    data = load_report_data(folder)
    seen: dict[str, set[str]] = {}
    for figure in build_figures(data):
        if figure is None:
            continue
        for item in figure.series.get("cases", []):
            if isinstance(item, dict) and "case" in item and "label" in item:
                # A fleet's rows add their site: "axfr @ far".
                seen.setdefault(item["case"], set()).add(item["label"].split(" @ ")[0])
    assert seen, "no figure names its cases"
    assert all(len(labels) == 1 for labels in seen.values()), seen
    labelled: Callable[[str], str] = data.labels
    assert all(labelled(case) in labels for case, labels in seen.items())
