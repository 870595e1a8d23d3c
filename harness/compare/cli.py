"""Subcommand `compare`; scipy and the comparison load only when it runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.core import ui
from harness.results.access import cannot_use


def register(subparsers: Any) -> None:
    from harness.compare.gate import DEFAULT_ALPHA, DEFAULT_THRESHOLD

    compare = subparsers.add_parser(
        "compare",
        help="compare two runs case by case (an upgrade gate); exit 1 on any regression",
        description="Matches the cases of RUN_A (baseline) and RUN_B and compares, per case, "
        "transfer durations, each server role's CPU per transfer, peak memory and TIME_WAIT "
        "peak, failures (Boschloo's exact test; a case failing in B and never in A is a "
        "regression) and a fleet's propagation, benchstat's way: medians with the spread of "
        "their bootstrap interval, the change or ~ when not significant, a geomean row. A "
        "change is significant when |change| > --threshold and the two-sided Mann-Whitney "
        "p < --alpha. Runs whose scenarios differ only in servers.*.suite or binary compare "
        "as they are. Exit status: 1 when B has any regression, 0 otherwise, 2 on bad input.",
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


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.compare.gate import load_and_compare
    from harness.compare.text import print_comparison

    try:
        result = load_and_compare(
            args.run_a,
            args.run_b,
            threshold=args.threshold,
            alpha=args.alpha,
            allow_different_scenario=args.allow_different_scenario,
        )
    except OSError as exc:
        raise cannot_use(exc) from None
    if args.json:
        print(json.dumps(result.to_json(), indent=2, allow_nan=False))
    else:
        print_comparison(result, ui.console())
    return result.exit_status
