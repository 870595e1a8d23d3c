"""Subcommands `report` and `compare`; the heavy imports (matplotlib, scipy) happen only
when one of them runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.core import ui
from harness.core.errors import UserInputError


def register(subparsers: Any) -> None:
    from harness.compare.gate import DEFAULT_ALPHA, DEFAULT_THRESHOLD

    report = subparsers.add_parser(
        "report", help="write RUN_DIR/report.html and print a summary of a run"
    )
    report.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder")
    report.add_argument(
        "--out", type=Path, metavar="FILE", help="write the HTML here (default RUN_DIR/report.html)"
    )
    report.set_defaults(func=cmd_report)

    compare = subparsers.add_parser(
        "compare",
        help="compare two runs case by case; exit 1 on a significant regression",
        description="Matches the cases of RUN_A (baseline) and RUN_B, prints medians with "
        "bootstrap confidence intervals and the change. A change is significant when "
        "|change| > --threshold and the two-sided Mann-Whitney p < --alpha. Exit status: "
        "1 when B has a significant regression, 0 otherwise, 2 on bad input.",
    )
    compare.add_argument("run_a", type=Path, metavar="RUN_A", help="baseline run folder")
    compare.add_argument("run_b", type=Path, metavar="RUN_B", help="run folder to check")
    compare.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"smallest relative change that matters (default {DEFAULT_THRESHOLD}: 5 %%)",
    )
    compare.add_argument(
        "--alpha",
        type=float,
        default=DEFAULT_ALPHA,
        help=f"significance level of the rank test (default {DEFAULT_ALPHA})",
    )
    compare.add_argument(
        "--allow-different-scenario",
        action="store_true",
        help="compare the shared cases of runs whose scenario spec hashes differ",
    )
    compare.add_argument("--json", action="store_true", help="machine-readable output")
    compare.set_defaults(func=cmd_compare)


def _file_error(exc: OSError) -> UserInputError:
    """Any file the report or compare could not read or write, said as a user error: the
    known files are checked on their own (harness.results.access); this catches the rest."""
    name = Path(exc.filename) if exc.filename else None
    return UserInputError(
        f"cannot use it: {exc.strerror or exc}",
        file=name,
        fix="check that you may read the run folder (a run made with sudo before runs were "
        "handed over is root's: `sudo chown -R $(id -un): RUN_DIR`), or run with sudo",
    )


def cmd_report(args: argparse.Namespace) -> int:
    try:
        write_and_print(args.run_dir, args.out)
    except OSError as exc:
        raise _file_error(exc) from None
    return 0


def write_and_print(run_dir: Path, out: Path | None = None) -> Path:
    """Write the run's report.html (or `out`) and print its summary and where it is."""
    from harness.report.data import REPORT_HTML, load_report_data
    from harness.report.html import write_report
    from harness.report.text import print_summary

    data = load_report_data(run_dir)
    written = write_report(data, out or Path(run_dir) / REPORT_HTML)
    print_summary(data, ui.console(), written)
    return written


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.compare.gate import load_and_compare
    from harness.report.text import print_comparison

    try:
        result = load_and_compare(
            args.run_a,
            args.run_b,
            threshold=args.threshold,
            alpha=args.alpha,
            allow_different_scenario=args.allow_different_scenario,
        )
    except OSError as exc:
        raise _file_error(exc) from None
    if args.json:
        print(json.dumps(result.to_json(), indent=2, allow_nan=False))
    else:
        print_comparison(result, ui.console())
    return result.exit_status
