"""Subcommand `compare`; scipy and the comparison load only when it runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.core import ui
from harness.results.access import cannot_use

EXIT_WORDS = (
    "Exit status: 0 no regression at the stated power (every required comparison could have "
    "seen a change of its threshold); 1 a regression (significant after Holm's correction "
    "and at least half its threshold, a failure new in B, a fleet that did not converge in "
    "B); 4 cannot tell (no regression, but a required comparison could not have seen one: "
    "it says how many repeats it needs; or a case or figure of A is missing in B, a case is "
    "unsupported only in B, a run was interrupted): a CI job that must not pass on too "
    "little data treats 4 as a failure; 2 bad input."
)


def register(subparsers: Any) -> None:
    from harness.compare.figures import DEFAULT_RESOURCE_THRESHOLD
    from harness.compare.gate import DEFAULT_ALPHA, DEFAULT_THRESHOLD

    compare = subparsers.add_parser(
        "compare",
        help="compare two runs, or the two sides of an A/B run, case by case (an upgrade "
        "gate): exit 1 on a regression, 4 when it cannot tell",
        description="Matches the cases of RUN_A (baseline) and RUN_B, or with --axis the "
        "two sides of one interleaved A/B run (RUN, one matrix axis over two server "
        "versions or configs: the recommended gate), and compares per case and over all "
        "cases: transfer durations, each server role's CPU, memory, connections and "
        "TIME_WAIT sockets left per transfer, failures (Boschloo's exact test; a failure new "
        "in B is a regression) and a fleet's or a stream's figures (one value per repeat). "
        "Each figure is tested with Yuen's 20 %-trimmed Welch test, one-sided (is B "
        "worse?), with Holm's correction over the call's tests, and states the smallest "
        "change it could have detected (80 % power) or how many repeats it needs. "
        "Runs whose scenarios differ only in servers.*.suite, binary or config (a snippet, "
        "by its text) "
        "compare as they are. " + EXIT_WORDS,
    )
    compare.add_argument("run_a", type=Path, metavar="RUN_A", help="baseline run folder")
    compare.add_argument(
        "run_b",
        type=Path,
        nargs="?",
        metavar="RUN_B",
        help="run folder to check (omit it with --axis: both sides are in RUN_A)",
    )
    compare.add_argument(
        "--axis",
        metavar="KEY",
        help="compare the two sides of one A/B run: the matrix axis KEY (as in [matrix], "
        "e.g. servers.primary.options); A is its first value, B its second",
    )
    compare.add_argument("--a", dest="side_a", metavar="VALUE", help="with --axis: A's value")
    compare.add_argument("--b", dest="side_b", metavar="VALUE", help="with --axis: B's value")
    compare.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"change that must be detectable in durations, fleets, streams and counts "
        f"(default {DEFAULT_THRESHOLD}: 5 %%)",
    )
    compare.add_argument(
        "--resource-threshold",
        type=float,
        default=DEFAULT_RESOURCE_THRESHOLD,
        help=f"the same for CPU and memory per transfer (default {DEFAULT_RESOURCE_THRESHOLD}:"
        " 10 %%; CPU per transfer spreads 10-35 %% per case)",
    )
    compare.add_argument(
        "--alpha",
        type=float,
        default=DEFAULT_ALPHA,
        help=f"family-wise error rate: the chance of any false regression in one call "
        f"(default {DEFAULT_ALPHA})",
    )
    compare.add_argument(
        "--strict",
        action="store_true",
        help="every comparison, per case too, must be decidable for exit 0 (by default "
        "only each figure over all cases and a fleet's or a stream's own figures)",
    )
    compare.add_argument(
        "--allow-different-scenario",
        action="store_true",
        help="compare the shared cases of runs whose scenario spec hashes differ",
    )
    compare.add_argument("--json", action="store_true", help="machine-readable output")
    compare.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.compare.ab import load_and_compare_axis
    from harness.compare.gate import load_and_compare
    from harness.compare.text import print_comparison
    from harness.core.errors import UserInputError

    options = {
        "threshold": args.threshold,
        "resource_threshold": args.resource_threshold,
        "alpha": args.alpha,
        "strict": args.strict,
    }
    try:
        if args.axis is not None:
            if args.run_b is not None:
                raise UserInputError(
                    "--axis compares the two sides of one run: give one run folder",
                    key="--axis",
                    fix=f"xfrbench compare {args.run_a} --axis {args.axis}",
                )
            result = load_and_compare_axis(
                args.run_a, args.axis, a=args.side_a, b=args.side_b, **options
            )
        else:
            if args.run_b is None or args.side_a or args.side_b:
                raise UserInputError(
                    "compare needs two run folders, or one with --axis (--a and --b go "
                    "with --axis)",
                    fix="xfrbench compare RUN_A RUN_B, or xfrbench compare RUN --axis KEY",
                )
            result = load_and_compare(
                args.run_a,
                args.run_b,
                allow_different_scenario=args.allow_different_scenario,
                **options,
            )
    except OSError as exc:
        raise cannot_use(exc) from None
    if args.json:
        print(json.dumps(result.to_json(), indent=2, allow_nan=False))
    else:
        print_comparison(result, ui.console())
    return result.exit_status
