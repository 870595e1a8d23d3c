"""`xfrbench link test`: bring a testbed up and compare its link with its configuration."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.core.errors import UserInputError
from harness.core.units import format_rate


def register(subparsers: Any) -> None:
    link = subparsers.add_parser("link", help="emulated link: measure it against its settings")
    sub = link.add_subparsers(dest="link_command", required=True, metavar="SUBCOMMAND")
    test = sub.add_parser(
        "test",
        help="build a testbed, measure RTT, loss each way and throughput (primary sends)",
        description="Units as in scenarios: 150ms, 1%%, 100mbit. --delay, --jitter, --loss, "
        "--rate and --mtu apply to both directions; --reverse-* override the "
        "reverse (secondary -> primary) direction.",
    )
    test.add_argument("--delay", metavar="D", help="one-way delay, both directions (e.g. 150ms)")
    test.add_argument("--reverse-delay", metavar="D", help="one-way delay secondary -> primary")
    test.add_argument("--jitter", metavar="J", help="jitter, both directions (e.g. 5ms)")
    test.add_argument("--loss", metavar="P", help="random loss, both directions (e.g. 1%%)")
    test.add_argument("--reverse-loss", metavar="P", help="random loss secondary -> primary")
    test.add_argument("--rate", metavar="R", help="rate limit, both directions (e.g. 100mbit)")
    test.add_argument("--mtu", metavar="M", help="MTU of both segments (576..9000)")
    test.add_argument("--mss-clamp", action="store_true", help="clamp TCP MSS to the path MTU")
    test.add_argument("--cc", metavar="NAME", help="congestion control of both hosts")
    test.add_argument(
        "--sysctl",
        metavar="HOST:KEY=VALUE",
        action="append",
        default=[],
        help="per-host TCP setting, HOST primary or secondary (repeatable)",
    )
    test.add_argument(
        "--duration", metavar="S", default="5s", help="throughput measurement length (default 5s)"
    )
    test.add_argument(
        "--omit",
        metavar="S",
        type=int,
        default=0,
        help="seconds of iperf3 ramp-up left out of the figure (default 0)",
    )
    test.add_argument(
        "--packets",
        type=int,
        default=20_000,
        help="UDP packets each way for the loss count (default 20000)",
    )
    test.add_argument("--pings", type=int, default=100, help="ping samples (default 100)")
    test.add_argument("--backend", default="auto", help="auto | netem | linkem (default auto)")
    test.add_argument("--block", default="198.18.0.0/15", help="address block (default RFC 2544)")
    test.add_argument("--run-dir", type=Path, help="keep linkem's config, logs and stats here")
    test.add_argument("--json", action="store_true", help="machine-readable output")
    test.set_defaults(func=handle_test)


def options_from_args(args: argparse.Namespace) -> Any:
    from harness.linktest.check import LinkTestOptions, build_specs, parse_duration_flag

    link, hosts = build_specs(
        delay=args.delay,
        reverse_delay=args.reverse_delay,
        jitter=args.jitter,
        loss=args.loss,
        reverse_loss=args.reverse_loss,
        rate=args.rate,
        mtu=args.mtu,
        backend=args.backend,
        cc=args.cc,
        sysctls=args.sysctl,
        mss_clamp=args.mss_clamp,
    )
    duration = parse_duration_flag(args.duration, "--duration")
    if duration < 1:
        raise UserInputError(
            f"{args.duration!r} is too short", key="--duration", fix="measure for at least 1s"
        )
    if args.packets < 20_000:
        raise UserInputError(
            f"{args.packets} packets cannot resolve 0.5 percentage points",
            key="--packets",
            fix="use 20000 or more",
        )
    if args.pings < 10:
        raise UserInputError(f"{args.pings} pings are too few", key="--pings", fix="use 10 or more")
    if args.omit < 0:
        raise UserInputError("must be 0 or more", key="--omit")
    return LinkTestOptions(
        link=link,
        hosts=hosts,
        duration=duration,
        omit=args.omit,
        pings=args.pings,
        packets=args.packets,
        block=args.block,
        run_dir=args.run_dir,
    )


def handle_test(args: argparse.Namespace) -> int:
    from harness.linktest import check as linktest

    options = options_from_args(args)
    result = linktest.run(options)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True, default=str))
    else:
        render(result, Console())
    return 0 if all(check["ok"] for check in result["checks"].values()) else 1


def _ms(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f} ms"


def _pct(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f} %"


def _rate(value: float | None) -> str:
    return "-" if value is None or math.isinf(value) else format_rate(value)


def _ok(result: dict[str, Any], name: str) -> str:
    check = result["checks"].get(name)
    if check is None:
        return ""
    return "[green]ok[/]" if check["ok"] else f"[red]off[/] (tolerance {check['tolerance']})"


def render(result: dict[str, Any], console: Console) -> None:
    configured, measured, bound = result["configured"], result["measured"], result["bound"]
    testbed = result["testbed"]
    console.print(
        f"link test: backend [bold]{result['backend']}[/], testbed "
        f"{testbed['testbed_id']} ({testbed['slice']}), primary "
        f"{testbed['hosts']['primary']['address']} -> secondary "
        f"{testbed['hosts']['secondary']['address']}"
    )
    table = Table()
    for column in ("", "configured", "measured", "bound", "check"):
        table.add_column(column)
    rtt = measured["rtt"]
    table.add_row(
        "RTT",
        _ms(configured["rtt_ms"]),
        f"{_ms(measured['rtt_ms'])} (min {_ms(rtt['min_ms'])}, "
        f"max {_ms(rtt['max_ms'])}, {rtt['samples']}/{rtt['sent']})",
        "",
        _ok(result, "rtt"),
    )
    for name in ("forward", "reverse"):
        sample = measured["loss_packets"][name]
        table.add_row(
            f"loss {name}",
            _pct(configured[f"loss_{name}"]),
            f"{_pct(measured[f'loss_{name}'])} "
            f"({sample['sent'] - sample['received']}/{sample['sent']})",
            "",
            _ok(result, f"loss_{name}"),
        )
    tput = measured["throughput"]
    table.add_row(
        "throughput (primary -> secondary)",
        _rate(configured["rate_bps"]) if configured["rate_bps"] else "no limit",
        f"{_rate(measured['throughput_bps'])} ({tput['congestion'] or '?'}, "
        f"{tput['retransmits']} retransmits)",
        f"{_rate(bound['model_bps'])} ({bound['limited_by'] or 'none'})",
        _ok(result, "rate"),
    )
    console.print(table)
    figures = [
        ("rate as TCP goodput", bound["rate_goodput_bps"]),
        ("receive window (tcp_rmem max / RTT)", bound["receive_window_bps"]),
        ("send window (tcp_wmem max / RTT)", bound["send_window_bps"]),
        ("Mathis", bound["mathis_bps"]),
        ("PFTK (b=2, RTO = RTT + 200 ms)", bound["pftk_bps"]),
    ]
    parts = [f"{label} {_rate(value)}" for label, value in figures if value is not None]
    if bound["bdp_bytes"]:
        parts.append(f"BDP {bound['bdp_bytes'] / 1e6:.2f} MB")
    console.print("bounds: " + "; ".join(parts) if parts else "bounds: none apply")
