"""`xfrbench doctor`: what this host offers the harness."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.core import ui
from harness.core.errors import EnvironmentProblem
from harness.core.terms import SERVER_KINDS, ServerKind
from harness.link.probe import KernelFeatures, probe_kernel
from harness.servers import server_class
from harness.servers.binaries import find_binary, probe_version
from harness.xfr.rrsum_native import implementation


@dataclass(frozen=True)
class ServerReport:
    kind: ServerKind
    binary: str | None
    version: str | None
    xot_primary: bool
    xot_secondary: bool
    ixfr_primary: bool
    ixfr_secondary: bool
    tsig: bool
    notes: tuple[str, ...]


NOTHING = (False,) * 5  # a server that is missing or says no version can do nothing


def probe_servers() -> list[ServerReport]:
    reports = []
    for kind in SERVER_KINDS:
        binary = find_binary(kind)
        if binary is None:
            reports.append(ServerReport(kind, None, None, *NOTHING, ("not installed",)))
            continue
        try:
            version = probe_version(kind, binary)
        except (EnvironmentProblem, OSError) as exc:
            reports.append(ServerReport(kind, str(binary), None, *NOTHING, (str(exc),)))
            continue
        caps = server_class(kind).capabilities(version)
        reports.append(
            ServerReport(
                kind,
                str(binary),
                version,
                caps.xot_primary.ok,
                caps.xot_secondary.ok,
                caps.ixfr_primary.ok,
                caps.ixfr_secondary.ok,
                caps.tsig.ok,
                caps.notes,
            )
        )
    return reports


def _mark(flag: bool) -> str:
    return "[green]yes[/]" if flag else "[red]no[/]"


def _digest_text(digest: dict[str, str]) -> str:
    if digest["implementation"] == "rust":
        return f"[green]compiled[/] (xfrbench_rrsum {digest['version']})"
    return f"[yellow]Python reference[/]: {digest['reason']}"


def render(
    kernel: KernelFeatures,
    servers: list[ServerReport],
    console: Console,
    digest: dict[str, str] | None = None,
) -> None:
    host = Table(title="host", show_header=False)
    host.add_row("kernel", kernel.kernel)
    host.add_row("root", _mark(kernel.root))
    for feature in ("netns", "veth", "netem", "htb", "tbf", "nfqueue"):
        host.add_row(feature, _mark(getattr(kernel, feature)))
    host.add_row("link backend (auto)", kernel.link_backend)
    host.add_row("congestion control allowed", " ".join(kernel.congestion_allowed))
    host.add_row("congestion control available", " ".join(kernel.congestion_available))
    if digest is not None:
        host.add_row("verification digest (RRSUM)", _digest_text(digest))
    for note in kernel.notes:
        host.add_row("note", note)
    console.print(host)
    # Short columns that never cut; the paths and the notes go below, whole.
    table = Table(title="servers")
    for column in ("kind", "version", "XoT primary", "XoT secondary", "IXFR primary"):
        table.add_column(column, overflow="fold")
    for column in ("IXFR secondary", "TSIG"):
        table.add_column(column, overflow="fold")
    for server in servers:
        table.add_row(
            server.kind,
            server.version or "-",
            _mark(server.xot_primary),
            _mark(server.xot_secondary),
            _mark(server.ixfr_primary),
            _mark(server.ixfr_secondary),
            _mark(server.tsig),
        )
    console.print(table)
    for server in servers:
        console.print(f"{server.kind}: {escape(server.binary or 'not found')}", soft_wrap=True)
        for note in server.notes:
            console.print(f"  {escape(note)}", soft_wrap=True)


def run(as_json: bool) -> int:
    kernel = probe_kernel()
    servers = probe_servers()
    digest = implementation()
    if as_json:
        report = {"host": kernel.to_json(), "servers": [asdict(s) for s in servers]}
        print(json.dumps({**report, "digest": digest}, indent=2))
    else:
        render(kernel, servers, ui.console(), digest)
    return 0
