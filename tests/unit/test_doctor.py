"""`xfrbench doctor`'s output, the first thing `make demo` prints: nothing cut."""

from __future__ import annotations

from rich.console import Console

from harness.commands.doctor import ServerReport, render
from harness.link.probe import KernelFeatures

KERNEL = KernelFeatures(
    True, True, True, False, True, True, True, ("reno", "bbr"), ("reno", "bbr", "cubic"),
    "6.18.44-fc-v657", (),
)  # fmt: skip
PDNS_NOTE = (
    "PowerDNS Authoritative 4.7.3 works off a 1 s loop: a secondary starts a transfer 0-1 s "
    "after the NOTIFY, and a primary sends its NOTIFY 0-1 s after the change"
)
SERVERS = [
    ServerReport("bind", "/usr/sbin/named", "9.18.49", *(True,) * 5, ()),
    ServerReport(
        "pdns", "/usr/sbin/pdns_server", "4.7.3", False, False, False, True, True, (PDNS_NOTE,)
    ),
]


def test_an_80_column_terminal_shows_versions_paths_and_notes_whole() -> None:
    console = Console(record=True, width=80)
    render(KERNEL, SERVERS, console, {"implementation": "rust", "version": "0.1.0"})
    out = console.export_text()
    assert "…" not in out
    assert "9.18.49" in out and "4.7.3" in out and "/usr/sbin/pdns_server" in out
    assert " ".join(out.split()).count(PDNS_NOTE) == 1  # whole, wrapped at most
