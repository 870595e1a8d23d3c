"""Subcommand `report`; the heavy imports (matplotlib, scipy) happen only when it runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.core import ui
from harness.results.access import cannot_use


def register(subparsers: Any) -> None:
    report = subparsers.add_parser(
        "report", help="write RUN_DIR/report.html and print a summary of a run"
    )
    report.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder")
    report.add_argument(
        "--out", type=Path, metavar="FILE", help="write the HTML here (default RUN_DIR/report.html)"
    )
    report.add_argument(
        "--json",
        action="store_true",
        help="print the first screen's figures as JSON (failed of counted and the reasons, "
        "transport costs, phases, link checks, bounds, cases, resources) instead of the "
        "summary; the report is written all the same",
    )
    report.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    try:
        write_and_print(args.run_dir, args.out, as_json=args.json)
    except OSError as exc:
        raise cannot_use(exc) from None
    return 0


def print_json(data: Any) -> None:
    """The first screen's figures as JSON on stdout (harness/report/summary_json.py)."""
    import json

    from harness.report.summary_json import first_screen

    print(json.dumps(first_screen(data), indent=2, allow_nan=False))


def write_and_print(run_dir: Path, out: Path | None = None, *, as_json: bool = False) -> Path:
    """Write the run's report.html (or `out`) and print its summary and where it is, or
    the first screen's figures as JSON."""
    from harness.report.data import load_report_data
    from harness.report.html import write_report
    from harness.report.text import print_summary
    from harness.results.folder import REPORT_HTML

    data = load_report_data(run_dir)
    written = write_report(data, out or Path(run_dir) / REPORT_HTML)
    if as_json:
        print_json(data)
    else:
        print_summary(data, ui.console(), written)
    return written
