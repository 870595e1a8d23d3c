"""`xfrbench report`: the numbers of ReportData, the figures and tables of report.html, the
terminal summary, on synthetic run folders whose figures are computed by hand here."""

from __future__ import annotations

import html
import json
import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.cli import main
from harness.report.data import load_report_data
from harness.report.figures import build_figures, write_png
from harness.report.figures_common import Figure
from harness.report.figures_resources import thin
from harness.report.html import render_html
from harness.report.labels import readable
from harness.report.text import print_summary
from harness.results import RunStore, TransferRecord

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
MIB = 1024 * 1024
CASE1 = "bind-bind/tcp/axfr"
CASE2 = "knot-bind/tcp/axfr"
CASE3 = "knot-bind/xot/axfr"
TIMEOUT = "timed out after 600 s waiting for serial 2"
NO_XOT = "unsupported: primary knot 3.2.6: Knot 3.2.6 has no XoT (added in 3.4)"
BOUND = {"model": 80e6, "rate": 80e6, "receive_window": 200e6}
RUN_META = {
    "scenario_name": "synthetic",
    "scenario": {"name": "synthetic", "description": "hand-made figures"},
    "spec_hash": "ab" * 32,
    "servers": {
        "bind@/usr/sbin/named": {"kind": "bind", "path": "/usr/sbin/named", "version": "9.18.49"},
        "knot@/usr/sbin/knotd": {"kind": "knot", "path": "/usr/sbin/knotd", "version": "3.2.6"},
    },
    "link_backend": "linkem",
    "host": {"hostname": "vm", "kernel": "6.1.0-test", "git_commit": "c0ffee" * 6 + "abcd"},
}


def record(run_id: str, case: str, repeat: int, **changes: Any) -> TransferRecord:
    base: dict[str, Any] = {
        "run_id": run_id,
        "case": case,
        "repeat": repeat,
        "primary_kind": case.split("-")[0],
        "secondary_kind": "bind",
        "host": "secondary",
        "site": None,
        "transport": case.split("/")[1],
        "xfr": "axfr",
        "zone": "tld.",
        "serial": 2,
        "records": 100_000,
        "bytes": 12_500_000,  # 100 Mbit: 1 s is 100 Mbit/s
        "messages": 100,
        "duration_s": 1.0,
        "started_at": 1000.0 + repeat,
        "ok": True,
        "verified": True,
    }
    base.update(changes)
    return TransferRecord(**base)


def sockets(time_wait_left: int) -> dict[str, Any]:
    """A record's extra["sockets"]: the secondary opened one connection and, here, holds
    its TIME_WAIT; the harness read the copy back over 2 connections in its namespace."""
    own = {"connections": 2, "time_wait_left": 2, "ports": [53]}
    return {
        "sockets": {
            "primary": {"connections": 0, "time_wait_left": 0},
            "secondary": {"connections": 1, "time_wait_left": time_wait_left},
            "still_open": 0,
            "harness": {"primary": {"connections": 1, "time_wait_left": 1}, "secondary": own},
        }
    }


def records(run_id: str) -> list[TransferRecord]:
    return [
        record(run_id, CASE1, 0, duration_s=1.0, bound=BOUND, extra=sockets(1)),
        record(run_id, CASE1, 1, duration_s=2.0, bound=BOUND, extra=sockets(2)),
        record(run_id, CASE1, 2, duration_s=1.5, bound=BOUND, extra=sockets(2)),
        record(run_id, CASE1, 0, duration_s=0.5, method="client-pull-own", trigger="pull"),
        record(run_id, CASE2, 0, duration_s=4.0),
        record(run_id, CASE2, 1, duration_s=None, ok=False, error=TIMEOUT),
        record(run_id, CASE2, 2, duration_s=3.0, verified=False),
        record(run_id, CASE3, 0, duration_s=None, ok=False, unsupported=True, error=NO_XOT),
    ]


def server_sample(case: str, role: str, t: float, event: str, repeat: int | None, **kw: Any):
    sample = {
        "t": t,
        "event": event,
        "case": case,
        "repeat": repeat,
        "role": role,
        "server": "bind",
        "pid": 100 if role == "primary" else 200,
        "source": "cgroup-v2",
        "cpu_user_s": 0.0,
        "cpu_system_s": 0.0,
        "anon_bytes": 10 * MIB,
        "charged_bytes": None,
        "charged_peak_bytes": None,
        "tcp": {"inuse": 1, "orphan": 0, "time_wait": 0, "alloc": 1},
        "tcp_states": {},
        "ephemeral_ports_in_use": 0,
        "retrans_segs": 0,
        "tcp_timeouts": 0,
        "active_opens": 0,
        "passive_opens": 0,
    }
    sample.update(kw)
    return sample


# CPU seconds each transfer uses, (user, system) per repeat: per transfer the primary's
# medians are user 0.3, system 0.1, total median(0.3, 0.5, 0.4) = 0.4; the secondary's user
# 0.5, system 0.2, total median(0.7, 0.8, 0.8) = 0.8.
CPU1 = {
    "primary": [(0.2, 0.1), (0.4, 0.1), (0.3, 0.1)],
    "secondary": [(0.5, 0.2), (0.5, 0.3), (0.6, 0.2)],
}


def samples() -> list[dict[str, Any]]:
    out = []
    for role in ("primary", "secondary"):
        user = system = 1.0
        out.append(
            server_sample(CASE1, role, 100.0, "periodic", None, cpu_user_s=1.0, cpu_system_s=1.0)
        )
        for repeat, (du, ds) in enumerate(CPU1[role]):
            start = 101.0 + 3 * repeat
            out.append(
                server_sample(
                    CASE1,
                    role,
                    start,
                    "transfer-start",
                    repeat,
                    cpu_user_s=user,
                    cpu_system_s=system,
                    tcp={"inuse": 1, "time_wait": 2 * repeat if role == "secondary" else 0},
                )
            )
            user, system = user + du, system + ds
            # TIME_WAIT: the secondary keeps 2 per finished transfer, the primary none;
            # Memory: the primary's anonymous peak is 12 MiB after repeat 1, the
            # secondary's 20 MiB, whose kernel peak of charged memory reaches 30 MiB.
            extra: dict[str, Any] = {}
            if role == "secondary":
                extra["tcp"] = {"inuse": 1, "orphan": 0, "time_wait": 2 * (repeat + 1)}
                extra["anon_bytes"] = 20 * MIB
                extra["charged_peak_bytes"] = 30 * MIB if repeat == 2 else 25 * MIB
            elif repeat == 1:
                extra["anon_bytes"] = 12 * MIB
            out.append(
                server_sample(
                    CASE1,
                    role,
                    start + 1,
                    "transfer-end",
                    repeat,
                    cpu_user_s=user,
                    cpu_system_s=system,
                    **extra,
                )
            )
    for role in ("primary", "secondary"):  # case 2: one marked transfer, 1 s of CPU
        out.append(server_sample(CASE2, role, 200.0, "transfer-start", 0, cpu_user_s=5.0))
        out.append(server_sample(CASE2, role, 201.0, "transfer-end", 0, cpu_user_s=6.0))
        out.append(server_sample(CASE2, role, 202.0, "periodic", None, cpu_user_s=6.0))
    for t, passed, dropped in ((100.0, 0, 0), (110.0, 1000, 5)):
        out.append(
            {
                "t": t,
                "event": "periodic",
                "case": CASE1,
                "repeat": None,
                "role": "link",
                "direction": "forward",
                "passed": passed,
                "dropped": dropped,
            }
        )
    return out


def make_run(
    root: Path, name: str, *, with_samples: bool = True, meta: dict[str, Any] | None = None
) -> Path:
    with RunStore.create(root, name, None, dict(meta or RUN_META)) as store:
        if with_samples:
            lines = "".join(json.dumps(s) + "\n" for s in samples())
            (store.folder / "samples.jsonl").write_text(lines)
        for item in records(name):
            store.append(item)
    return store.folder


# --- a small HTML reader ------------------------------------------------------------------


class Page(HTMLParser):
    """Figures (attributes, caption, series JSON, inline SVG) and table cells of the report."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.figures: dict[str, dict[str, Any]] = {}
        # (case, method or role, class) -> text and data-value of a table cell
        self.cells: dict[tuple[str, str, str], dict[str, str]] = {}
        self._figure: str | None = None
        self._row: dict[str, str] | None = None
        self._cell: dict[str, str] | None = None
        self._capture: str | None = None
        self._text: list[str] = []
        self.feed(text)
        for match in re.finditer(r'<figure id="([^"]+)"[^>]*>(.*?)</figure>', text, re.S):
            svg = re.search(r"<svg\b.*?</svg>", match.group(2), re.S)
            self.figures[match.group(1)]["svg"] = svg.group(0) if svg else None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "figure":
            self._figure = a["id"]
            self.figures[a["id"]] = {"attrs": a}
        elif tag == "figcaption" or (tag == "script" and "series" in a.get("class", "")):
            self._capture, self._text = tag, []
        elif tag == "tr" and "data-case" in a:
            self._row = a
        elif tag == "td" and self._row is not None:
            self._cell = a
            self._capture, self._text = "td", []

    def handle_data(self, data: str) -> None:
        if self._capture:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        text = "".join(self._text).strip()
        if tag == "figcaption" and self._figure and self._capture == "figcaption":
            self.figures[self._figure]["caption"] = text
        elif tag == "script" and self._figure and self._capture == "script":
            self.figures[self._figure]["series"] = json.loads(text)
        elif tag == "td" and self._row is not None and self._cell is not None:
            for name in self._cell.get("class", "").split():
                kind = self._row.get("data-method") or self._row.get("data-role", "")
                key = (self._row["data-case"], kind, name)
                self.cells[key] = {"text": text, "value": self._cell.get("data-value", "")}
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag == "figure":
            self._figure = None
        if tag in ("figcaption", "script", "td"):
            self._capture = None


SVG = "{http://www.w3.org/2000/svg}"


def drawn(svg: str, prefix: str) -> dict[str, int]:
    """Element id -> number of markers drawn under it, for the ids starting with prefix."""
    root = ET.fromstring(svg)
    counts = {}
    for group in root.iter(f"{SVG}g"):
        gid = group.get("id", "")
        if gid.startswith(prefix):
            counts[gid] = len(list(group.iter(f"{SVG}use"))) or len(list(group.iter(f"{SVG}path")))
    return counts


def svg_text(svg: str) -> str:
    return " ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{SVG}text"))


# --- the model ----------------------------------------------------------------------------


def test_case_figures_are_the_hand_computed_ones(tmp_path: Path) -> None:
    data = load_report_data(make_run(tmp_path, "r1"))
    rows = {(row.case, row.method): row for row in data.cases}
    assert list(rows) == [
        (CASE1, "server-to-server"),
        (CASE1, "client-pull-own"),
        (CASE2, "server-to-server"),
        (CASE3, "server-to-server"),
    ]
    one = rows[(CASE1, "server-to-server")]
    assert one.durations_s == [1.0, 2.0, 1.5]
    assert one.median_s == 1.5
    assert one.p10_s == 1.0  # nearest rank: ceil(0.1 x 3) = the 1st of 1.0, 1.5, 2.0
    assert one.p90_s == 2.0  # ceil(0.9 x 3) = the 3rd
    assert one.throughputs_bps == pytest.approx([100e6, 50e6, 100e6 / 1.5])
    assert one.throughput_bps == pytest.approx(100e6 / 1.5)
    assert one.model_bound_bps == 80e6 and one.limited_by == "rate"
    assert one.unstable and one.unstable_why == "CV 33% > 10%"  # stdev 0.5 / mean 1.5
    pull = rows[(CASE1, "client-pull-own")]
    assert pull.label == f"{CASE1} [pull-own]" and pull.durations_s == [0.5]
    assert pull.unstable_why == "only 1 verified transfer (fewer than 3)"
    two = rows[(CASE2, "server-to-server")]
    assert (two.n, two.ok, two.failed, two.unsupported) == (3, 1, 2, 0)
    assert two.median_s == 4.0 and two.bound_bps == {}
    assert two.failure_reasons == [("not verified", 1), (TIMEOUT, 1)]
    three = rows[(CASE3, "server-to-server")]
    assert three.unsupported == 1 and three.unsupported_reasons == [(NO_XOT, 1)]
    assert three.median_s is None and three.unstable_why is None
    assert data.run.state == "complete" and not data.warnings
    assert [(s.kind, s.version) for s in data.run.servers] == [
        ("bind", "9.18.49"),
        ("knot", "3.2.6"),
    ]


def test_resources_from_summary_json_and_from_samples_agree(tmp_path: Path) -> None:
    folder = make_run(tmp_path, "r1")
    stored = load_report_data(folder)
    assert stored.resources_source == "summary.json"
    summary = json.loads((folder / "summary.json").read_text())
    del summary["resources"]  # a run finished before the summary had them
    (folder / "summary.json").write_text(json.dumps(summary))
    computed = load_report_data(folder)
    assert computed.resources_source == "samples.jsonl"
    assert computed.resources == stored.resources

    by_case = {item.case: item for item in computed.resources}
    assert list(by_case) == [CASE1, CASE2]
    primary, secondary = by_case[CASE1].roles["primary"], by_case[CASE1].roles["secondary"]
    assert primary.cpu_user_s_per_transfer == pytest.approx(0.3)
    assert primary.cpu_system_s_per_transfer == pytest.approx(0.1)
    assert primary.cpu_total_s_per_transfer == pytest.approx(0.4)
    assert secondary.cpu_total_s_per_transfer == pytest.approx(0.8)
    assert primary.anon_peak_bytes == 12 * MIB and secondary.anon_peak_bytes == 20 * MIB
    assert primary.charged_peak_bytes is None and secondary.charged_peak_bytes == 30 * MIB
    assert primary.namespace_time_wait_peak == 0 and secondary.namespace_time_wait_peak == 6
    assert by_case[CASE1].link == {"forward": {"passed": 1000, "dropped": 5}}
    assert by_case[CASE2].roles["primary"].cpu_total_s_per_transfer == pytest.approx(1.0)


def test_terminal_resources_show_per_transfer_figures_and_the_namespace_peak_as_such(
    tmp_path: Path,
) -> None:
    console = Console(record=True, width=300)
    print_summary(load_report_data(make_run(tmp_path, "r1")), console)
    out = console.export_text()
    table = out[out.index("resources per case") :]
    head = " ".join(table.splitlines()[1:4])
    for column in ("anon peak/transfer", "conns/transfer", "TIME_WAIT left/transfer"):
        assert column in head
    assert "namespace TIME_WAIT peak" in head and "peak TIME_WAIT" not in table
    # CPU 800 ms, anon 20 MiB per transfer, 1 connection, 2 TIME_WAIT left (median of
    # 1, 2, 2), 2 of the harness's, then the case's peaks and the namespace's 6
    row = next(line for line in table.splitlines() if "secondary" in line and "800" in line)
    cells = [c.strip() for c in re.split(r"[│┃|]", row) if c.strip()]
    assert cells[-7:] == ["20 MiB", "1", "2", "2", "20 MiB", "30 MiB", "6"], cells
    assert "the harness's own connections" in " ".join(out.split())


def test_time_wait_series_per_role(tmp_path: Path) -> None:
    data = load_report_data(make_run(tmp_path, "r1"))
    secondary = data.time_wait["secondary"]
    # the periodic sample, 3 x (start, end) of case 1, then start, end, periodic of case 2
    assert len(secondary) == 10 and len(data.time_wait["primary"]) == 10
    assert secondary[:7] == [(0.0, 0), (1.0, 0), (2.0, 2), (4.0, 2), (5.0, 4), (7.0, 4), (8.0, 6)]
    assert data.case_spans == [(CASE1, 0.0, 10.0), (CASE2, 100.0, 102.0)]


def test_thin_keeps_peaks() -> None:
    points = [(float(i), 1) for i in range(100)]
    points[37] = (37.0, 50)
    thinned = thin(points, 10)
    assert len(thinned) == 10 and (37.0, 50) in thinned
    assert thin(points[:5], 10) == points[:5]


# --- the page -----------------------------------------------------------------------------


def test_report_html_figures_and_tables(tmp_path: Path) -> None:
    folder = make_run(tmp_path, "r1")
    page_text = render_html(load_report_data(folder))
    page = Page(page_text)
    assert list(page.figures) == [
        "fig-phases",
        "fig-duration",
        "fig-throughput",
        "fig-cpu",
        "fig-memory",
        "fig-timewait",
    ]
    for fid, figure in page.figures.items():
        assert figure["caption"], fid
        assert figure["svg"] is not None, f"{fid} was not drawn"

    # duration: 3 + 1 + 1 verified transfers; the unsupported case is named, not drawn
    duration = page.figures["fig-duration"]
    assert duration["attrs"]["data-points"] == "5"
    assert duration["attrs"]["data-series-count"] == "4"
    series = duration["series"]["cases"]
    assert [c["points"] for c in series] == [[1.0, 2.0, 1.5], [0.5], [4.0], []]
    assert [c["median"] for c in series] == [1.5, 0.5, 4.0, None]
    assert series[3]["missing"] == "no verified transfer (1 unsupported)"
    marks = drawn(duration["svg"], "fig-duration-points-")
    assert marks == {
        "fig-duration-points-0": 3,
        "fig-duration-points-1": 1,
        "fig-duration-points-2": 1,
    }
    assert len(drawn(duration["svg"], "fig-duration-median-")) == 3
    text = svg_text(duration["svg"])
    assert "transfer duration (s)" in text and readable(CASE3) in text and "1 unsupported" in text

    # throughput against the bound: only case 1 has one
    throughput = page.figures["fig-throughput"]
    assert throughput["series"]["bounded"] is True
    assert [c["bound"] for c in throughput["series"]["cases"]] == [80e6, None, None, None]
    assert list(drawn(throughput["svg"], "fig-throughput-bound-")) == ["fig-throughput-bound-0"]
    assert "throughput (Mbit/s)" in svg_text(throughput["svg"])

    # CPU: two roles x two cases, user + system stacked
    cpu = page.figures["fig-cpu"]
    assert cpu["attrs"]["data-points"] == "4"
    first = cpu["series"]["cases"][0]
    # named as in every other table and figure (one shortening per report): the run's four
    # cases share no part, so the name stays whole
    assert (first["case"], first["label"]) == (CASE1, readable(CASE1))
    assert first["primary"]["total"] == pytest.approx(0.4)
    assert first["secondary"]["user"] == pytest.approx(0.5)
    assert len(drawn(cpu["svg"], "fig-cpu-bar-")) == 8  # 4 bars of 2 segments
    assert "CPU time per transfer (s)" in svg_text(cpu["svg"])

    memory = page.figures["fig-memory"]
    assert [(c["primary"], c["secondary"]) for c in memory["series"]["cases"]] == [
        (12 * MIB, 20 * MIB),
        (10 * MIB, 10 * MIB),
    ]
    assert "peak anonymous memory (MiB)" in svg_text(memory["svg"])

    timewait = page.figures["fig-timewait"]
    assert timewait["attrs"]["data-points"] == "20"
    assert max(n for _, n in timewait["series"]["roles"]["secondary"]) == 6
    assert set(drawn(timewait["svg"], "fig-timewait-line-")) == {  # one line per case
        "fig-timewait-line-primary-0",
        "fig-timewait-line-primary-1",
        "fig-timewait-line-secondary-0",
        "fig-timewait-line-secondary-1",
    }
    assert "TIME_WAIT sockets" in svg_text(timewait["svg"])

    # tables: the medians and their exact values
    s2s = "server-to-server"
    assert page.cells[(CASE1, s2s, "median")] == {"text": "1.50 s", "value": "1.5"}
    assert page.cells[(CASE1, s2s, "p10")]["text"] == "1.00 s"  # nearest rank: a real one
    assert page.cells[(CASE1, "client-pull-own", "median")]["text"] == "500 ms"
    assert page.cells[(CASE2, s2s, "median")]["text"] == "4.00 s"
    assert page.cells[(CASE2, s2s, "failed")]["text"] == "2"
    notes = page.cells[(CASE2, s2s, "notes")]["text"]
    assert "failed: 1 timed out [1], 1 copy differs from the primary [2]" in notes
    # failures first: the banner names each reason once, with its count and first case
    banner = " ".join(html.unescape(page_text.split('id="failures-banner"')[1]).split())
    assert banner.startswith(
        "> <b>FAILED: 2 of 7 transfers failed or were not verified (they count in no "
        "figure); 1 unsupported"
    )
    assert f"1 × timed out</b>: <code>{TIMEOUT}</code> (first {CASE2} repeat 1)" in banner
    assert page_text.index('id="failures-banner"') < page_text.index('id="q-transports"')
    assert "Knot 3.2.6 has no XoT" in page.cells[(CASE3, s2s, "notes")]["text"]
    assert page.cells[(CASE1, s2s, "bound")]["text"] == "80 Mbit/s (rate)"
    assert page.cells[(CASE1, s2s, "throughput")]["text"] == "66.7 Mbit/s"
    assert page.cells[(CASE1, "primary", "cpu-per-transfer")]["text"] == "400 ms"
    # beside CPU per transfer, the window it covers (README, "What a transfer costs")
    words = " ".join(html.unescape(page_text).split())
    assert (
        "CPU per transfer is what each server's cgroup used between a sample taken just "
        "before the harness puts the new zone version on the primary" in words
    )
    assert "Cold start: from just after the secondary starts until it serves every zone" in words
    assert page.cells[(CASE1, "secondary", "anon-peak")]["text"] == "20 MiB"
    assert page.cells[(CASE1, "secondary", "charged-peak")]["text"] == "30 MiB"
    assert "charged peak is everything the kernel charged to the server's cgroup" in words
    # per transfer, medians: the primary's anon peaks 10, 12, 10 MiB; the sockets of the
    # records' extra["sockets"], the harness's apart; the namespace's peak named for it
    cell = page.cells
    assert cell[(CASE1, "primary", "memory-per-transfer")]["text"] == "10 MiB"
    assert cell[(CASE1, "secondary", "connections-per-transfer")]["text"] == "1"
    assert cell[(CASE1, "secondary", "time-wait-left")]["text"] == "2"
    assert cell[(CASE1, "primary", "time-wait-left")]["text"] == "0"
    assert cell[(CASE1, "secondary", "harness-connections")]["text"] == "2"
    assert cell[(CASE1, "primary", "harness-connections")]["text"] == "1"
    assert cell[(CASE1, "secondary", "namespace-time-wait-peak")]["text"] == "6"
    assert cell[(CASE2, "secondary", "connections-per-transfer")]["text"] == "-"
    assert "namespace's TIME_WAIT peak (all sockets, last 60 s)" in words
    assert "the harness's own connections (its read-back of each copy" in words


def test_report_is_self_contained(tmp_path: Path) -> None:
    page = render_html(load_report_data(make_run(tmp_path, "r1")))
    # the only URLs are the SVG namespace names, never fetched
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
    assert not re.search(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=", page)
    assert all('type="application/json"' in tag for tag in re.findall(r"<script\b[^>]*>", page))
    # several inline SVGs: no element id twice
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    references = set(re.findall(r'(?:url\(#|href="#)([^")]+)', page))
    assert references and references <= set(ids)  # clip paths and markers still resolve


def test_no_bound_says_unimpaired_link(tmp_path: Path) -> None:
    folder = make_run(tmp_path, "r1")
    lines = [json.loads(line) for line in (folder / "transfers.jsonl").read_text().splitlines()]
    for line in lines:
        line["bound"] = {}
    (folder / "transfers.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    figure = Page(render_html(load_report_data(folder))).figures["fig-throughput"]
    assert figure["series"]["bounded"] is False
    assert "No bound: unimpaired link" in figure["caption"]
    assert drawn(figure["svg"], "fig-throughput-bound-") == {}
    assert "no bound: unimpaired link" in svg_text(figure["svg"])


def test_run_without_samples_says_so(tmp_path: Path) -> None:
    page = Page(render_html(load_report_data(make_run(tmp_path, "r1", with_samples=False))))
    for fid in ("fig-cpu", "fig-memory", "fig-timewait"):
        figure = page.figures[fid]
        assert figure["svg"] is None and figure["attrs"]["data-points"] == "0", fid
    text = render_html(load_report_data(tmp_path / "r1"))
    assert "no samples.jsonl in this run" in text
    assert 'id="resources-missing"' in text
    assert page.figures["fig-duration"]["attrs"]["data-points"] == "5"


def test_interrupted_run_is_flagged(tmp_path: Path) -> None:
    folder = tmp_path / "r1"
    with pytest.raises(KeyboardInterrupt), RunStore.create(tmp_path, "r1", None, RUN_META) as s:
        s.append(records("r1")[0])
        raise KeyboardInterrupt
    data = load_report_data(folder)
    assert data.run.state == "interrupted"
    page = render_html(data)
    assert "the run was interrupted" in page
    assert re.search(r'data-key="interrupted"><th>interrupted</th><td>yes', page)


def test_legacy_fixture_run(tmp_path: Path) -> None:
    """A run written before samples.jsonl and summary resources existed (a trimmed copy of a
    real run folder)."""
    folder = shutil.copytree(FIXTURES / "report-legacy", tmp_path / "legacy")
    data = load_report_data(folder)
    assert [row.median_s for row in data.cases] == [2.532041274000221, 2.537897192999935, None]
    assert data.resources == [] and data.time_wait == {}
    assert data.run.servers[0].version == "9.18.49" and data.run.link_backend == "linkem"
    assert data.cases[0].link == "delay 0ms (each way)"
    figures = {f.id: f for f in build_figures(data)}
    assert figures["fig-duration"].points == 2
    assert figures["fig-throughput"].series["bounded"] is False
    assert not figures["fig-cpu"].drawable


def test_cli_report_writes_the_page_and_prints_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_run(tmp_path, "r1")
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert (folder / "report.html").is_file()
    assert f"report: {folder / 'report.html'}" in out
    assert "run r1: scenario synthetic" in out and "bind 9.18.49" in out
    lines = out.splitlines()
    assert lines[0].startswith("FAILED: 2 of 7 transfers failed or were not verified")
    assert lines[1] == f"  [1] 1 x timed out: {TIMEOUT} (first {CASE2} repeat 1)"
    assert lines[2] == (
        f"  [2] 1 x copy differs from the primary: not verified (first {CASE2} repeat 2)"
    )
    assert lines[3].startswith("  unsupported: primary knot 3.2.6: Knot 3.2.6 has no XoT")
    assert lines[4] == (
        f"  details: {folder / 'report.html'}#failures; every attempt: {folder}/transfers.jsonl"
    )
    assert "1.5" in out  # the median of case 1
    assert "CPU per transfer: each server's cgroup from just before the new zone" in out
    other = tmp_path / "elsewhere.html"
    assert main(["report", str(folder), "--out", str(other)]) == 0
    assert 'id="fig-duration"' in other.read_text()


def test_a_run_without_the_compiled_sum_says_so_on_its_first_screen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run.json alone said that the Python reference summed the copies (its verify and wall
    times are not a working build's): the first screen and report.html say it too."""
    why = "the xfrbench_rrsum extension is not installed (No module named 'xfrbench_rrsum')"
    meta = RUN_META | {"digest": {"implementation": "python", "reason": why}}
    folder = make_run(tmp_path, "r1", meta=meta)
    assert main(["report", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (warning,) = [line for line in lines if "Python reference RRSUM" in line]
    assert warning.startswith("warning: copies were verified by the Python reference RRSUM")
    assert why in warning and lines.index(warning) < 12  # beside the run's own lines
    assert "Python reference RRSUM" in (folder / "report.html").read_text()
    compiled = RUN_META | {"digest": {"implementation": "rust", "version": "0.1.0"}}
    quiet = load_report_data(make_run(tmp_path, "r2", meta=compiled))
    assert not [w for w in quiet.warnings if "RRSUM" in w]


@pytest.mark.parametrize("name", ["missing", "file", "empty"])
def test_cli_report_bad_input_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    target = tmp_path / name
    if name == "file":
        target.write_text("x")
    elif name == "empty":
        target.mkdir()
    assert main(["report", str(target)]) == 2
    err = capsys.readouterr().err
    assert str(target) in err and "run folder" in err


def test_cli_report_out_in_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    folder = make_run(tmp_path, "r1", with_samples=False)
    assert main(["report", str(folder), "--out", str(tmp_path / "no" / "r.html")]) == 2
    assert "--out" in capsys.readouterr().err


def test_png_rendering(tmp_path: Path) -> None:
    data = load_report_data(make_run(tmp_path, "r1"))
    figure: Figure = build_figures(data)[0]
    path = write_png(figure, tmp_path / "duration.png")
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
