"""`xfrbench capacity`: its flags; the work is command.py's (imported when it runs, so that
`xfrbench --help` stays fast)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def _positive(flag: str) -> Any:
    def parse(text: str) -> float:
        from harness.core.errors import UserInputError

        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not value > 0:
            raise argparse.ArgumentTypeError(
                str(UserInputError(f"{text!r} is not a number above 0", key=flag))
            )
        return value

    return parse


def _compare(args: argparse.Namespace) -> int:
    """Two campaigns' capacities and curves side by side."""
    from harness.capacity.answer import compare_lines
    from harness.capacity.command import print_answer
    from harness.core import ui
    from harness.core.errors import UserInputError
    from harness.results.campaign import read_campaign

    a, b = (read_campaign(Path(folder)) for folder in args.compare)
    if (a["key"], a["sla"]["text"]) != (b["key"], b["sla"]["text"]):
        raise UserInputError(
            f"the campaigns answer different questions: {a['key']} within {a['sla']['text']} "
            f"and {b['key']} within {b['sla']['text']}",
            key="--compare",
            fix="compare two searches of the same key and SLA",
        )
    console = ui.console()
    for line in compare_lines(a, b):
        console.print(line, soft_wrap=True, markup=False)
    for data, folder in zip((a, b), args.compare, strict=True):
        print_answer(data | {"folder": folder}, console)
    return 0


def _show(folder: Path) -> int:
    """A campaign's answer printed again and its page drawn again (capacity.html)."""
    from rich.markup import escape

    from harness.capacity.command import print_answer
    from harness.capacity.report import write_page
    from harness.core import ui
    from harness.results.campaign import read_campaign

    data = read_campaign(folder) | {"folder": str(folder)}
    console = ui.console()
    print_answer(data, console)
    console.print(escape(f"page: {write_page(folder, data)}"), soft_wrap=True)
    return 0


def _run(args: argparse.Namespace) -> int:
    from harness.capacity.command import Options, main
    from harness.core.errors import UserInputError

    if args.compare:
        return _compare(args)
    if args.show:
        return _show(args.show)
    if args.scenario is None or args.vary is None:
        raise UserInputError(
            "a search needs a scenario and --vary KEY",
            key="--vary",
            fix="e.g. xfrbench capacity scenarios/capacity.toml --vary secondaries.edge.count",
        )

    options = Options(
        scenario=args.scenario,
        key=args.vary,
        start=args.start,
        maximum=args.maximum,
        sla=args.sla,
        then=args.then,
        factor=args.factor,
        resolution=args.resolution,
        results=args.results,
        campaign_id=args.campaign_id,
    )
    if options.factor <= 1:
        raise UserInputError(
            f"--factor {options.factor:g} would never raise the load", key="--factor",
            fix="give more than 1, e.g. --factor 2",
        )  # fmt: skip
    return main(options, args.json)


def register(subparsers: Any) -> None:
    cap = subparsers.add_parser(
        "capacity",
        help="find the load at which a scenario stops meeting its SLA, and what binds",
        description="Runs the scenario with KEY stepped up geometrically from --from until a "
        "step fails the SLA (or --max passes), then bisects between the last pass and the "
        "first fail; every step is a real run (results/<run-id>/), all linked in a campaign "
        "folder (results/capacity-<id>/capacity.json). Prints the capacity and the limit that "
        "bound it first, then the curve and the evidence. See docs/capacity.md.",
    )
    cap.add_argument("scenario", type=Path, nargs="?", help="scenario TOML file with one case")
    cap.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="instead of a search: two campaign folders' capacities and curves (did an "
        "upgrade move capacity?)",
    )
    cap.add_argument(
        "--show",
        type=Path,
        metavar="FOLDER",
        help="instead of a search: a campaign folder's answer, curve and evidence printed "
        "again, and its page (FOLDER/capacity.html) drawn again",
    )
    cap.add_argument(
        "--vary",
        metavar="KEY",
        help="the key path that scales the load, as [matrix] names it: "
        "secondaries.<site>.count, zones.zones, zones.records, stream.interval (its load is "
        "serials a minute)",
    )
    cap.add_argument(
        "--from",
        dest="start",
        type=_positive("--from"),
        metavar="X",
        help="the first load (default: KEY's value in the scenario, else 1)",
    )
    cap.add_argument("--max", dest="maximum", type=_positive("--max"), metavar="Y",
                     help="the highest load to try (default 64)")  # fmt: skip
    cap.add_argument(
        "--sla",
        metavar="TEXT",
        help='"p95 load time 30s", "all served 60s" or "no failures" (default: the '
        "scenario's [stream] sla as a p95 load time, else all served within its timeout)",
    )
    cap.add_argument(
        "--then",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="search again with this key changed too (repeatable: all apply to the second "
        "search), e.g. servers.primary.options.transfers-out=20",
    )
    cap.add_argument("--factor", type=float, default=2.0, help="step-up factor (default 2)")
    cap.add_argument(
        "--resolution",
        type=_positive("--resolution"),
        metavar="R",
        help="bisect until last pass and first fail are this close (default 1)",
    )
    cap.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="folder that holds run folders (default: results)",
    )
    cap.add_argument("--campaign-id", help="name of the campaign folder (default: capacity-<time>)")
    cap.add_argument(
        "--json",
        action="store_true",
        help="print capacity.json on stdout when done; progress goes to stderr",
    )
    cap.set_defaults(func=_run)
