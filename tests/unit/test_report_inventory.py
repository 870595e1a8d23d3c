"""The report of a run on inventory hosts (`run --inventory`): hosts named as the inventory
names them (the primary is "ns0", not "primary"), on a synthetic run shaped like the lab's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.core.terms import SERVER_TO_SERVER
from harness.report.case_rows import CLOCK_MARK
from harness.report.data import load_report_data
from harness.report.html import render_html
from harness.report.link_checks import link_checks
from harness.report.text import print_summary
from harness.results import RunStore
from harness.run.remote import with_clock
from tests.unit.test_remote import _Fleet
from tests.unit.test_report import RUN_META, Page
from tests.unit.test_report_answers import record
from tests.unit.test_report_fleet_answers import SAMPLE

CASE = "bind-bind/tcp/axfr"
HOSTS = {"ns0": ("primary", ""), "ns1": ("secondary", "near"), "ns3": ("secondary", "far")}


def lab_samples() -> list[dict[str, Any]]:
    """Each host's start and end marks of two transfers: ns0 spends 0.2 s of CPU per
    transfer, ns1 0.3 s, ns3 0.5 s."""
    cpu = {"ns0": 0.2, "ns1": 0.3, "ns3": 0.5}
    out = []
    for repeat in (1, 2):
        for event, spent in (("transfer-start", repeat - 1), ("transfer-end", repeat)):
            for host, (role, site) in HOSTS.items():
                out.append(
                    SAMPLE
                    | {"t": 10.0 * repeat + (event == "transfer-end"), "event": event,
                       "case": CASE, "repeat": repeat, "role": role, "host": host,
                       "cpu_user_s": round(cpu[host] * spent, 6), "anon_bytes": 3 << 20}
                    | ({"site": site} if site else {})
                )  # fmt: skip
    return out


def make_lab_run(root: Path, records: list[Any] | None = None) -> Path:
    with RunStore.create(root, "lab", None, dict(RUN_META)) as store:
        for item in records or [
            record("lab", CASE, repeat, 0.5, host=host, site=HOSTS[host][1])
            for repeat in (1, 2)
            for host in ("ns1", "ns3")
        ]:
            store.append(item)
        lines = "".join(json.dumps(s) + "\n" for s in lab_samples())
        (store.folder / "samples.jsonl").write_text(lines)
    return store.folder


def test_the_resources_table_has_a_row_per_inventory_host(tmp_path: Path) -> None:
    """summary.json keys a fleet's figures by host: the tables printed none of the lab's,
    whose primary is not called "primary" (nor the secondaries of any fleet)."""
    folder = make_lab_run(tmp_path)
    stored = json.loads((folder / "summary.json").read_text())["resources"][CASE]
    assert set(stored) == {"ns0", "ns1", "ns3", "link"}
    data = load_report_data(folder)
    (item,) = data.resources
    rows = {label: (r.role, r.cpu_total_s_per_transfer) for label, r in item.roles.items()}
    assert rows == {
        "primary ns0": ("primary", 0.2),
        "secondary ns1, near": ("secondary", 0.3),
        "secondary ns3, far": ("secondary", 0.5),
    }
    console = Console(record=True, width=240)
    print_summary(data, console)
    out = console.export_text()
    table = out[out.index("resources per case") :]
    for label, seconds in (("primary ns0", "200"), ("secondary ns1, near", "300"),
                           ("secondary ns3, far", "500")):  # fmt: skip
        line = next(line for line in table.splitlines() if label in line)
        assert seconds in line, line
    page = Page(render_html(data))
    assert page.cells[(CASE, "secondary ns3, far", "cpu-per-transfer")]["value"] == "0.5"


def clocked_records() -> list[Any]:
    """ns3's clock error (40 ms) plus the primary's (2 ms) is over 10 % of its 0.3 s
    transfers; ns1's (1 ms) is not of its 0.5 s ones."""
    fleet = _Fleet({"ns0": 0.002, "ns1": 0.001, "ns3": 0.040})
    out = []
    for repeat in (1, 2):
        for host, duration in (("ns1", 0.5), ("ns3", 0.3)):
            item = record("lab", CASE, repeat, duration, host=host, site=HOSTS[host][1],
                          method=SERVER_TO_SERVER, duration_error_s=0.005)  # fmt: skip
            out.append(with_clock(item, fleet, "ns0"))  # type: ignore[arg-type]
    return out


def test_durations_over_10_percent_clock_error_are_flagged(tmp_path: Path) -> None:
    records = clocked_records()
    assert [r.extra["clock"]["clock_error_over_10pct"] for r in records] == [False, True] * 2
    data = load_report_data(make_lab_run(tmp_path, records))
    (row,) = data.cases
    assert (row.clock_flagged, row.clock_error_max_s) == (2, 0.042)
    page = render_html(data)
    cells = Page(page).cells
    assert CLOCK_MARK in cells[(CASE, SERVER_TO_SERVER, "median")]["text"]
    assert "clock error > 10 %: 2 of 4" in cells[(CASE, SERVER_TO_SERVER, "notes")]["text"]
    assert 'id="clock-note"' in page and "42.0 ms" in page
    console = Console(record=True, width=240)
    print_summary(data, console)
    out = console.export_text()
    assert "clock error > 10 %: 2 of 4" in out
    assert f"{CLOCK_MARK} 2 transfers of the marked cases" in out and "42.0 ms" in out


def test_no_clock_flag_no_mark(tmp_path: Path) -> None:
    records = [r for r in clocked_records() if r.host == "ns1"]
    data = load_report_data(make_lab_run(tmp_path, records))
    assert data.cases[0].clock_flagged == 0
    page = render_html(data)
    assert CLOCK_MARK not in page and 'id="clock-note"' not in page
    console = Console(record=True, width=240)
    print_summary(data, console)
    assert CLOCK_MARK not in console.export_text()


REMOTE = {  # run.json's remote.paths as run --inventory stores them
    "paths": {
        "ns1": {"to": "ns0", "site": "near", "sent": 5, "received": 5, "rtt_min_s": 0.000052,
                "rtt_avg_s": 0.000081, "bandwidth": {"bits_per_second": 11970809234,
                "seconds": 3.0, "retransmits": 473, "tool": "iperf 3.12"},
                "transfers": {"transfers": 2, "data_segs_out": 4000, "retransmits": 40,
                              "retransmit_pct": 1.0, "tcp_rtt_min_s": 0.000041}},
        "ns3": {"to": "ns0", "site": "far", "sent": 5, "received": 4, "rtt_min_s": 0.0501,
                "rtt_avg_s": 0.0502, "bandwidth": {"error": "unable to connect to server"},
                "transfers": {"transfers": 2, "data_segs_out": 900, "retransmits": 0,
                              "retransmit_pct": 0.0, "tcp_rtt_min_s": 0.05}},
    }
}  # fmt: skip


def test_the_link_check_shows_the_real_paths_found(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, "lab", None, dict(RUN_META) | {"remote": REMOTE}) as store:
        for repeat in (1, 2):
            store.append(record("lab", CASE, repeat, 0.5, host="ns1", site="near"))
    data = load_report_data(store.folder)
    assert [(p.host, p.site, p.retransmits, p.bandwidth_bps) for p in data.real_paths] == [
        ("ns1", "near", 40, 11970809234.0),
        ("ns3", "far", 0, None),
    ]
    page = render_html(data)
    table = page[
        page.index('<table id="real-paths">') : page.index("</table>", page.index("real-paths"))
    ]
    assert "40 of 4,000" in table and "12 Gbit/s" in table
    assert "probe failed: unable to connect to server" in table and "1 of 5 lost" in table
    assert 'id="link-missing"' not in page  # the paths are what there is to check
    console = Console(record=True, width=240)
    print_summary(data, console)
    out = console.export_text()
    assert "The real paths" in out and "40 of 4,000 (1 %)" in out
    assert render_html(load_report_data(make_lab_run(tmp_path / "other"))).count("real-paths") == 0


def test_the_link_check_takes_the_rtt_an_inventory_primary_saw() -> None:
    """On inventory hosts a record's RTT is the primary's TCP's to the host in the repeat
    (extra.path, remote/pathwatch.py), not a sock_diag sample of its own (extra.tcp)."""
    records = [
        record("lab", CASE, repeat, 0.5, host="ns3", site="far",
               extra={"path": {"connections": 1, "rtt_ms_min": rtt}})
        for repeat, rtt in ((1, 80.3), (2, 80.2))
    ]  # fmt: skip
    (far,) = [c for c in link_checks(records, {}) if c.path == "far"]
    assert far.rtt_min_s == pytest.approx(0.0802)
    assert far.rtt_samples == 2


def test_the_real_paths_under_a_sites_link_say_what_went_through_it(tmp_path: Path) -> None:
    """A site that sets [link]: the table above the link check says its TCP figures went
    through the emulated link (ping and the probe did not), and marks that site; a site
    without one, and a run without any, keep "no link asked for"."""
    counters = {"passed": 1000, "dropped_loss": 0, "state": "up"}
    records = [
        record("lab", CASE, repeat, 0.5, host=host, site=HOSTS[host][1],
               extra={"path": {"connections": 1, "rtt_ms_min": rtt}}
               | ({"link": {"ns3 forward": counters, "ns3 reverse": counters}}
                  if host == "ns3" else {}))
        for repeat in (1, 2)
        for host, rtt in (("ns1", 0.05), ("ns3", 80.2))
    ]  # fmt: skip
    with RunStore.create(tmp_path, "lab", None, dict(RUN_META) | {"remote": REMOTE}) as store:
        for item in records:
            store.append(item)
    data = load_report_data(store.folder)
    assert [(p.site, p.linked) for p in data.real_paths] == [("near", False), ("far", True)]
    console = Console(record=True, width=400)
    print_summary(data, console)
    out = console.export_text()
    assert "no link asked for" not in out
    assert "The real paths under the emulated links (sites marked *)" in out
    assert "RTT pinged before any link was emulated" in out
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│ ns")}
    assert "far *" in rows["ns3"] and "*" not in rows["ns1"]
    assert out.index("The real paths") < out.index("Did the link do what was asked:")
    page = render_html(data)
    assert "no link was asked for" not in page
    assert "through the emulated link" in page and "<td>far *</td>" in page
    # The same run without the far site's link: the primary's RTT alone emulates nothing.
    with RunStore.create(
        tmp_path / "bare", "lab", None, dict(RUN_META) | {"remote": REMOTE}
    ) as bare:
        for item in records:
            bare.append(dataclasses.replace(item, extra={"path": item.extra["path"]}))
    console = Console(record=True, width=400)
    print_summary(load_report_data(bare.folder), console)
    assert "The real paths (no link asked for)" in console.export_text()
