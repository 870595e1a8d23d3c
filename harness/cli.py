"""The `xfrbench` command: doctor, zones, run, link, report, compare, clean, capacity."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from harness.core import ui
from harness.core.errors import UserInputError, XfrbenchError

if TYPE_CHECKING:
    from harness.compose.backend import Backend
    from harness.spec.scenario import Scenario


def _cmd_doctor(args: argparse.Namespace) -> int:
    from harness.commands import doctor

    return doctor.run(as_json=args.json)


def _print_cases(loaded: object, console: Console, alpha: float) -> None:
    """The expanded cases with their transfers, the estimated wall time, and whether the
    repeats can ever show a difference at `alpha`."""
    from harness.link.describe import describe_direction
    from harness.plan.case import group_cases, plan_case
    from harness.plan.estimate import estimate
    from harness.spec import LoadedScenario

    assert isinstance(loaded, LoadedScenario)
    scenario = loaded.scenario
    plans = [plan_case(case) for case in loaded.cases]
    total = sum(plan.transfers() for plan in plans)
    repeats = (
        scenario.repeats if scenario.repeats != "auto" else f"auto (up to {scenario.max_repeats})"
    )
    console.print(
        escape(
            f"scenario {scenario.name} ({loaded.path}), spec hash {loaded.spec_hash[:16]}, "
            f"{len(loaded.cases)} cases x {repeats} repeats: {total:,} transfers"
        ),
        soft_wrap=True,
    )
    columns = ["case", "zone", "trigger", "secondaries", "forward link", "reverse link"]
    width = max((len(case.name) for case in loaded.cases), default=0)
    table = ui.folding_table("cases", [*columns, "transfers"], left=6, names=width)

    def describe(direction: object) -> str:
        return describe_direction(direction.model_dump(mode="json"))  # type: ignore[attr-defined]

    for case, plan in zip(loaded.cases, plans, strict=True):
        zones = case.scenario.zones
        zone = f"{zones.preset} {zones.record_count:,} rec"
        if zones.file is not None:
            zone = f"{zones.origin} {Path(zones.file).name} {zones.record_count:,} rec"
            if zones.versions:
                zone += f", {len(zones.versions)} versions"
        if plan.catalog is not None:  # the pool: the members and those the repeats add
            zone += f" x {plan.zone_spec.zones:,} zones, catalog of {plan.catalog.members:,}"
        elif zones.preset == "hosting":
            zone += f" x {zones.zones:,} zones"
        fleet = case.scenario.fleet
        sites = [f"{s.name} x{s.count} ({s.kind})" if s.count > 1 else f"{s.name} ({s.kind})"
                 for s in fleet]  # fmt: skip
        forward = [describe(s.link.forward) for s in fleet]
        reverse = [describe(s.link.reverse) for s in fleet]
        uplink = case.scenario.uplink
        if uplink.impaired or uplink.forward.rate or uplink.reverse.rate:
            sites.append("uplink (primary)")
            forward.append(describe(uplink.forward))
            reverse.append(describe(uplink.reverse))
        table.add_row(
            escape(case.name),
            zone,
            case.scenario.trigger,
            escape("\n".join(sites)),
            escape("\n".join(forward)),
            escape("\n".join(reverse)),
            f"{plan.transfers():,}",
        )
    ui.print_table(console, table)
    guess = estimate(group_cases(plans), scenario.passes, scenario.order)
    console.print(escape(guess.describe()), soft_wrap=True)
    warning = repeats_warning(scenario, alpha)
    if warning:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    lines, short = _compare_plan(scenario, alpha, len(loaded.cases))
    if short:  # a run meant for `compare` needs more; the demo, say, does not
        lines.append('at these repeats compare would likely say "cannot tell" (exit 4)')
    for line in lines:
        console.print(escape(line), soft_wrap=True)


def repeats_warning(scenario: Scenario, alpha: float) -> str | None:
    """When the scenario's repeats can never give p < alpha: then the report's transport
    table (a rank test) can call no difference significant."""
    from harness.core.stats import min_two_sided_p, repeats_for_alpha

    repeats = scenario.repeats  # type: ignore[attr-defined]
    least = (
        (scenario.repeats_auto.min if scenario.repeats_auto else 5)
        if repeats == "auto"
        else repeats
    )  # type: ignore[attr-defined]
    needed = repeats_for_alpha(alpha)
    if least >= needed:
        return None
    floor = min_two_sided_p(least, least)
    return (
        f"{least} repeats per case can never give p < {alpha:g}: the smallest two-sided "
        f"Mann-Whitney p for {least} against {least} transfers is {floor:.3g}, so the "
        f"report's transport table cannot call a difference significant; set "
        f"repeats = {max(5, needed)} (at least {needed})"
    )


def _compare_plan(scenario: Scenario, alpha: float, cases: int = 0) -> tuple[list[str], bool]:
    """compare's power at the scenario's repeats over its `cases` (by default one per
    transport and kind)."""
    from harness.results.planning import plan_lines

    repeats = scenario.repeats  # type: ignore[attr-defined]
    least = (
        (scenario.repeats_auto.min if scenario.repeats_auto else 5)  # type: ignore[attr-defined]
        if repeats == "auto"
        else repeats
    )
    cases = cases or len(scenario.transports) * len(scenario.xfr)  # type: ignore[attr-defined]
    return plan_lines(int(least), cases, alpha=alpha)


def _check_run_options(args: argparse.Namespace) -> None:
    """The flags of `run`, checked before any work (and by --dry-run)."""
    from harness.results.store import check_new_run_folder

    if not args.sample_interval > 0:  # also refuses nan
        raise UserInputError(
            f"--sample-interval must be more than 0 s, got {args.sample_interval:g}",
            key="--sample-interval",
            fix="e.g. --sample-interval 0.5",
        )
    if args.prometheus_port is not None and not 0 <= args.prometheus_port <= 65535:
        raise UserInputError(
            f"--prometheus-port {args.prometheus_port} is not a TCP port",
            key="--prometheus-port",
            fix="pick 1024-65535, e.g. 9100 (0 picks a free one)",
        )
    _check_address(args.prometheus_address)
    if args.inventory is not None and (args.backend != "netns" or args.compose_project):
        raise UserInputError(
            "--inventory runs the servers on the inventory's hosts; it takes no other backend",
            key="--inventory",
            fix="drop --backend/--compose-project, or --inventory",
        )
    if args.compose_project:
        if args.backend == "netns":
            raise UserInputError(
                "--compose-project applies to the compose backend only",
                key="--compose-project",
                fix="add --backend compose",
            )
        from harness.compose.deploy import check_project_name

        check_project_name(args.compose_project)
    check_new_run_folder(args.results, args.run_id, args.out)


def _check_scenario_for_backend(loaded: object, args: argparse.Namespace) -> list[str]:
    """What the backend can tell without root: suites it can run, and (netns) the server
    binaries on this host, which it returns described. Images are checked by `run`."""
    from harness.compose.backend import Backend, check_scenario
    from harness.plan.capacity import check_memory, host_memory_bytes
    from harness.plan.case import plan_case
    from harness.plan.versions import check_versions
    from harness.servers.binaries import check_host_binaries
    from harness.spec import LoadedScenario

    assert isinstance(loaded, LoadedScenario)
    if args.inventory is not None:
        from harness.inventory import load_inventory, match_sites
        from harness.run.remote import check_scenario as check_on_inventory

        check_on_inventory(loaded)
        inventory = load_inventory(args.inventory)
        sites = match_sites(inventory, loaded)
        return [f"{site}: {', '.join(h.name for h in hosts)}" for site, hosts in sites.items()]
    check_scenario(loaded, Backend(args.backend))
    plans = [plan_case(case) for case in loaded.cases]
    check_memory(plans, host_memory_bytes(), loaded.path)
    check_versions(plans, loaded.path)
    if args.backend != "netns":
        return []
    servers = [(host.role, host.server.kind, host.server.binary) for p in plans for host in p.hosts]
    found = check_host_binaries(servers, loaded.path)
    return [f"{b.kind} {b.version} ({b.path})" for b in found.values()]


def _cmd_run(args: argparse.Namespace) -> int:
    import os

    from harness import spec

    # Every check that needs no root runs first, for --dry-run and run alike.
    loaded = spec.load(args.scenario)
    _check_run_options(args)
    binaries = _check_scenario_for_backend(loaded, args)
    # With --json, stdout is the JSON's: what a person reads goes to stderr.
    console = ui.console(stderr=args.json)
    from harness.run.snippets import check_snippets

    local = args.inventory is None and args.backend == "netns"
    for warning in check_snippets(loaded, local=local):
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    if args.dry_run:
        _print_cases(loaded, console, args.alpha)
        if binaries:
            if args.inventory is not None:
                console.print(f"sites: {escape('; '.join(binaries))}")
            else:
                console.print(f"servers: {escape(', '.join(binaries))}")
        return 0
    if os.geteuid() != 0:
        raise UserInputError(
            "xfrbench run needs root (network namespaces, iptables, sysctls)",
            fix=f"run it with sudo, or check it without root: xfrbench run --dry-run "
            f"{args.scenario}",
        )
    warning = repeats_warning(loaded.scenario, args.alpha)
    if warning:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    from harness.run.runner import run_scenario

    run_dir = run_scenario(
        loaded,
        results_root=args.results,
        out=args.out,
        run_id=args.run_id,
        prometheus_port=args.prometheus_port,
        prometheus_address=_check_address(args.prometheus_address),
        sample_interval=args.sample_interval,
        backend=_backend(args),
        inventory=args.inventory,
        console=console,
    )
    if args.report:
        from harness.report.data import load_report_data
        from harness.report.html import write_report
        from harness.results.folder import REPORT_HTML

        written = write_report(load_report_data(run_dir), run_dir / REPORT_HTML)
        console.print(f"report: {written}", soft_wrap=True)
    if args.json:
        from harness.report.cli import print_json
        from harness.report.data import load_report_data

        print_json(load_report_data(run_dir))
    return run_exit_status(run_dir, args.allow_failures, console)


def run_exit_status(run_dir: Path, allow_failures: bool, console: Console) -> int:
    """1 when no transfer counts (nothing was measured: every cell unsupported, every
    attempt failed, or none made; --allow-failures does not change that), or when a
    transfer that was meant to count failed or was not verified (unsupported cells are
    declared, not failures), unless failures are allowed; 0 otherwise."""
    from harness.results.failures import summarize_failures
    from harness.results.folder import read_records

    failures = summarize_failures(read_records(run_dir))
    if failures.nothing_measured:
        console.print(
            f"[bold red]exit 1[/]: nothing was measured ({escape(failures.nothing_reasons())})",
            soft_wrap=True,
        )
        return 1
    if not failures.failed:
        return 0
    counts = f"{failures.failed} of {failures.counted} transfers failed or were not verified"
    if allow_failures:
        console.print(f"{counts}; exit 0 (--allow-failures)", soft_wrap=True)
        return 0
    console.print(
        f"[bold red]exit 1[/]: {counts} (--allow-failures exits 0 for exploration)",
        soft_wrap=True,
    )
    return 1


def _check_address(text: str) -> str:
    import ipaddress

    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise UserInputError(
            f"--prometheus-address {text!r} is not an IP address",
            key="--prometheus-address",
            fix="e.g. 127.0.0.1 (this host only) or 0.0.0.0 (every interface)",
        ) from None


def _backend(args: argparse.Namespace) -> Backend:
    """The testbed backend: compose runs per-run projects, or a running project's containers
    (--compose-project; by default the driver container's own project)."""
    from harness.compose.backend import Backend

    if args.backend == "netns" or args.inventory is not None:
        return Backend("netns")
    from harness.compose import daemon, deploy

    if args.compose_project:
        return Backend("compose", deploy.check_project_name(args.compose_project))
    daemon.ensure_dockerd()
    return Backend("compose", deploy.own_project())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xfrbench",
        description="Benchmark DNS zone transfers between real servers over an emulated link.",
        epilog="Exit status: 0 done; 1 run measured nothing (no transfer counts) or had a "
        "transfer that failed or was not verified (unsupported cells are declared, not "
        "failures; run --allow-failures exits 0 unless nothing was measured), "
        "compare found a regression, or a tool or server failed; 2 a usage error (a "
        "scenario, a flag, a file; also `run` without root); "
        "3 the host lacks something (a server binary, a kernel feature, an image); "
        "130 interrupted.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    doctor = sub.add_parser("doctor", help="what this host offers: kernel features, servers")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(func=_cmd_doctor)

    from harness.capacity import cli as capacity_cli
    from harness.commands import clean
    from harness.commands import zones as zones_cli
    from harness.compare import cli as compare_cli
    from harness.lab import cli as lab_cli
    from harness.linktest import cli as link_cli
    from harness.report import cli as report_cli

    zones_cli.register(sub)
    link_cli.register(sub)
    clean.register(sub)
    lab_cli.register(sub)

    run = sub.add_parser(
        "run",
        help="run a scenario; exit 1 when a transfer failed or was not verified",
        description="Runs every case of the scenario and writes results/<run-id>/. Exit "
        "status: 0 when every transfer meant to count was verified (cells the servers' "
        "versions cannot do are recorded as unsupported: declared, not failures); 1 when "
        "any failed or was not verified (--allow-failures: 0), when nothing was measured "
        "(no transfer counts: every cell unsupported or every attempt failed; "
        "--allow-failures too), or a tool or server failed; 2 bad input or no root; 3 the "
        "host lacks something; 130 interrupted.",
    )
    run.add_argument("scenario", type=Path, help="scenario TOML file, e.g. scenarios/quick.toml")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="make every check run makes that needs no root (the scenario, these flags, "
        "the server binaries, the backend's suites) and print the expanded cases, their "
        "transfers, an estimate of the wall time and whether the repeats can show a "
        "difference at --alpha",
    )
    run.add_argument("--out", type=Path, help="write the run folder here instead of results/")
    run.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="folder that holds run folders (default: results)",
    )
    run.add_argument("--run-id", help="name of the run folder (default: time + random)")
    run.add_argument(
        "--prometheus-port",
        type=int,
        metavar="PORT",
        help="serve live metrics for Prometheus on ADDR:PORT while the run goes on",
    )
    run.add_argument(
        "--prometheus-address",
        default="127.0.0.1",
        metavar="ADDR",
        help="address the metrics are served on (default 127.0.0.1; the compose driver "
        "uses 0.0.0.0 so that its Prometheus container can scrape it)",
    )
    run.add_argument(
        "--backend",
        choices=("netns", "compose"),
        default="netns",
        help="netns: namespaces of the driver's own, servers installed on this host "
        "(default); compose: the hosts are containers, servers from images "
        "(servers.<role>.suite picks the Debian release)",
    )
    run.add_argument(
        "--compose-project",
        metavar="NAME",
        help="compose backend: use this running project's containers (e.g. the one "
        "docker-compose.yml starts) instead of a project per case; default: the "
        "driver container's own project when run inside it",
    )
    run.add_argument(
        "--inventory",
        type=Path,
        metavar="FILE",
        help="run the servers on the hosts of this Ansible inventory (YAML or INI: group "
        "primary, group secondaries with a `site` each), deployed with ansible-playbook; "
        "`xfrbench lab up N` makes one on this machine",
    )
    run.add_argument(
        "--sample-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often servers' CPU, memory and sockets are sampled (default 1 s; "
        "every transfer's start and end are sampled too)",
    )
    run.add_argument(
        "--report", action="store_true", help="write RUN_DIR/report.html when the run ends"
    )
    run.add_argument(
        "--json",
        action="store_true",
        help="when the run ends, print the first screen's figures as JSON on stdout (as "
        "report --json does); progress and the summary go to stderr",
    )
    run.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="the significance level you will compare at (default 0.05): run and --dry-run "
        "warn when the scenario's repeats can never reach it",
    )
    run.add_argument(
        "--allow-failures",
        action="store_true",
        help="exit 0 even when transfers failed or were not verified (exploring a setup "
        "that is expected to fail); the summary still puts them first. A run that "
        "measured nothing (no transfer counts) still exits 1",
    )
    run.set_defaults(func=_cmd_run)
    report_cli.register(sub)
    compare_cli.register(sub)
    capacity_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except XfrbenchError as exc:
        # Messages hold key paths like transports[0]: escape them so rich shows them as written.
        ui.console(stderr=True).print(
            f"[bold red]xfrbench: error:[/] {escape(str(exc))}", soft_wrap=True
        )
        return exc.exit_status
    except KeyboardInterrupt:
        print("xfrbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
