"""The report's first screen (what each transport costs, where the time went, whether the
link did what was asked, how close to the bound), on synthetic run folders: every expected
figure is computed here from the records the folder holds (the fleet section's:
test_report_fleet_answers.py)."""

from __future__ import annotations

import json
import math
import re
import statistics
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.link.losscheck import check_loss
from harness.report.data import load_report_data
from harness.report.html import render_html
from harness.report.labels import readable
from harness.results import RunStore, TransferRecord
from harness.results.meta import CaseMeta
from harness.spec import LossSpec

PAIR = "bind-bind/preset=tld"
TCP, TSIG, XOT, XOT_TSIG = (f"{PAIR}/{t}/axfr" for t in ("tcp", "tcp-tsig", "xot", "xot-tsig"))
DRIFT_TCP, DRIFT_TSIG = f"{PAIR}/tcp/ixfr", f"{PAIR}/tcp-tsig/ixfr"
TINY = "bind-bind/preset=tiny/tcp/axfr"  # TCP only: nothing to normalise
DURATIONS = {
    TCP: [1.00, 1.02, 0.98, 1.01, 0.99],
    TSIG: [1.11, 1.13, 1.09, 1.12, 1.10],  # every one above every TCP transfer
    XOT: [1.00, 1.03, 0.97, 1.015, 0.995],
    DRIFT_TCP: [0.50, 0.51, 0.49, 0.505, 0.495, 0.50],
    DRIFT_TSIG: [0.50, 0.55, 0.60, 0.65, 0.70, 0.75],  # climbs repeat after repeat
    TINY: [0.08, 0.081, 0.079],
}
NO_XOT = "unsupported: primary knot 3.2.6: no XoT"
RATE = 10_000_000  # bit/s, configured forward
BOUND = {"model": 9.6e6, "rate": 9.6e6, "receive_window": 26e6, "receive_buffer": 2.5e9}
ZONE_BYTES = 1_000_000
RTT_MS = [20.5, 20.3, 20.9, 20.4, 20.6, 20.5]
META = {
    "scenario_name": "answers",
    "spec_hash": "cd" * 32,
    "servers": {"bind": {"kind": "bind", "version": "9.18.49"}},
    "link_backend": "linkem",
}


def direction(delay: float, loss_pct: float, rate: int | None = None) -> dict[str, Any]:
    return {"delay": delay, "loss": {"model": "random", "p": loss_pct}, "rate": rate}


LINK = {"forward": direction(0.010, 1.0, RATE), "reverse": direction(0.010, 1.0)}


def case_meta(case: str, transport: str, links: dict[str, Any], **extra: Any) -> CaseMeta:
    hosts = {
        "primary": {"sysctls": {"net.ipv4.tcp_congestion_control": "cubic",
                                "net.ipv4.tcp_wmem": "4096 16384 4194304"}},
    }  # fmt: skip
    for host in links:
        hosts[host] = {"sysctls": {"net.ipv4.tcp_rmem": "4096 131072 6291456"}}
    return CaseMeta(
        case=case,
        transport=transport,
        xfr="axfr",
        scenario={"link": next(iter(links.values()))} | extra.pop("scenario", {}),
        testbed={"links": links, "hosts": hosts},
        **extra,
    )


def link_entry(passed: int, dropped: int, **more: Any) -> dict[str, Any]:
    return {"passed": passed, "dropped": dropped, "dropped_loss": dropped,
            "emulated": passed + dropped} | more  # fmt: skip


def record(run_id: str, case: str, repeat: int, duration: float | None, **changes: Any):
    transport = case.split("/")[-2]
    base: dict[str, Any] = {
        "run_id": run_id,
        "case": case,
        "repeat": repeat,
        "primary_kind": "bind",
        "secondary_kind": "bind",
        "host": "secondary",
        "site": None,
        "transport": transport,
        "xfr": case.split("/")[-1],
        "zone": "tld.",
        "serial": 2 + repeat,
        "records": 10_000,
        "bytes": ZONE_BYTES,
        "messages": 100,
        "duration_s": duration,
        "started_at": 1000.0 + repeat,
        "ok": duration is not None,
        "verified": duration is not None,
        "trigger": "notify",
        "error": None if duration is not None else NO_XOT,
        "unsupported": duration is None,
    }
    if duration is not None:
        phases = {"primary_reload": 0.03, "notify_sent": 0.02, "connect": 0.042}
        if not transport.startswith("xot"):
            phases["soa_query"] = 0.021
        base["phases"] = phases | {"served": duration}
        base["server_logged"] = {"secondary": {"duration_s": 0.9 * duration - 0.05}}
        base["bound"] = BOUND
        base["extra"] = {
            "link": {
                "forward": link_entry(990, 10, rate_bytes=RATE * duration / 8),
                "reverse": link_entry(900, 100),
            },
            "tcp": {"rtt_ms_min": RTT_MS[repeat], "rcv_wnd_max": 65536 + 1024 * repeat,
                    "congestion": "cubic"},
        }  # fmt: skip
    base.update(changes)
    return TransferRecord(**base)


def write_cases(folder: Path, metas: list[CaseMeta]) -> None:
    for index, meta in enumerate(metas):
        where = folder / "cases" / f"{index:03d}"
        where.mkdir(parents=True)
        (where / "case.json").write_text(json.dumps(meta.to_json()))


def make_run(root: Path, name: str = "r1") -> Path:
    with RunStore.create(root, name, None, META) as store:
        for case, durations in DURATIONS.items():
            for repeat, duration in enumerate(durations):
                changes = {"bytes": 200} if case == TINY else {}
                store.append(record(name, case, repeat, duration, **changes))
        store.append(record(name, XOT_TSIG, 0, None))
    metas = [
        case_meta(case, case.split("/")[-2], {"secondary": LINK}) for case in [*DURATIONS, XOT_TSIG]
    ]
    write_cases(store.folder, metas)
    return store.folder


class Tables(HTMLParser):
    """Every table of the page by id: rows of (row attributes, [(cell attributes, text)])."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: dict[str, list[tuple[dict[str, str], list[tuple[dict[str, str], str]]]]] = {}
        self._table: str | None = None
        self._cell: dict[str, str] | None = None
        self._text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._table = a.get("id", "")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append((a, []))
        elif tag == "td" and self._table is not None:
            self._cell, self._text = a, []
        elif tag == "br":
            self._text.append(" ")

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self._table is not None:
            text = " ".join("".join(self._text).split())
            self.tables[self._table][-1][1].append((self._cell, text))
            self._cell = None
        elif tag == "table":
            self._table = None

    def rows(self, table: str, key: str = "data-case") -> list[Any]:
        """The body rows of a table: those that carry `key`."""
        return [(a, cells) for a, cells in self.tables[table] if key in a]


# --- what each transport costs ------------------------------------------------------------


def test_transport_costs_are_medians_against_tcp(tmp_path: Path) -> None:
    data = load_report_data(make_run(tmp_path))
    groups = {g.key: g for g in data.transports}
    # the tiny zone ran TCP alone: nothing to compare, no row
    assert list(groups) == [f"{PAIR}/axfr", f"{PAIR}/ixfr"]
    axfr = groups[f"{PAIR}/axfr"]
    tcp_median = statistics.median(DURATIONS[TCP])
    assert axfr.baseline_median_s == tcp_median and axfr.baseline_n == 5
    costs = {c.transport: c for c in axfr.costs}
    assert list(costs) == ["tcp", "tcp-tsig", "xot", "xot-tsig"]
    assert costs["tcp"].index == 100 and costs["tcp"].ci is None
    tsig = costs["tcp-tsig"]
    assert tsig.index == pytest.approx(100 * statistics.median(DURATIONS[TSIG]) / tcp_median)
    assert tsig.index == pytest.approx(111)
    # every TSIG transfer above every TCP one: the exact two-sided p is 2 / C(10, 5)
    assert tsig.p_value == pytest.approx(2 / math.comb(10, 5))
    assert tsig.significant and tsig.testable
    # the interval of the ratio of medians lies within the ratios the samples allow
    assert tsig.ci is not None
    low = 100 * min(DURATIONS[TSIG]) / max(DURATIONS[TCP])
    high = 100 * max(DURATIONS[TSIG]) / min(DURATIONS[TCP])
    assert low <= tsig.ci[0] <= tsig.index <= tsig.ci[1] <= high
    assert tsig.spread == pytest.approx(max(tsig.index - tsig.ci[0], tsig.ci[1] - tsig.index))
    xot = costs["xot"]
    assert xot.index == pytest.approx(100 * statistics.median(DURATIONS[XOT]) / tcp_median)
    assert xot.p_value is not None and xot.p_value > 0.05 and not xot.significant
    assert costs["xot-tsig"].index is None
    assert costs["xot-tsig"].missing == "unsupported: primary knot 3.2.6: no XoT"
    assert not axfr.drifting


def test_a_drifting_case_is_flagged(tmp_path: Path) -> None:
    data = load_report_data(make_run(tmp_path))
    ixfr = next(g for g in data.transports if g.key == f"{PAIR}/ixfr")
    tcp, tsig = ixfr.costs
    assert not tcp.drift
    assert ixfr.drifting and any(line.startswith("drift: +") for line in tsig.drift)


# --- where the time went ------------------------------------------------------------------


def test_phases_of_the_median_transfer_add_up(tmp_path: Path) -> None:
    data = load_report_data(make_run(tmp_path))
    phases = {p.case: p for p in data.phases}
    tcp = phases[TCP]
    median = statistics.median(DURATIONS[TCP])
    assert tcp.repeat == DURATIONS[TCP].index(median) and tcp.n == 5
    assert tcp.duration_s == median and tcp.offset_s == 0.02
    logged = 0.9 * median - 0.05
    assert tcp.logged_secondary_s == pytest.approx(logged)
    got = [(s.name, s.start_s, s.seconds) for s in tcp.segments]
    want = [
        ("reload command -> NOTIFY", 0.0, 0.02),
        ("NOTIFY -> SOA query", 0.02, 0.021),
        ("SOA query -> connect", 0.041, 0.021),
        # the logged time ends at served: what precedes it is connecting (handshakes)
        ("connect -> transfer starts (log)", 0.062, median - 0.042 - logged),
        ("transfer starts (log) -> served", 0.02 + median - logged, logged),
    ]
    assert [name for name, _, _ in got] == [name for name, _, _ in want]
    for (_, start, seconds), (_, want_start, want_seconds) in zip(got, want, strict=True):
        assert start == pytest.approx(want_start) and seconds == pytest.approx(want_seconds)
    # one time axis: the segments follow each other and end at NOTIFY + duration
    assert sum(s.seconds for s in tcp.segments) == pytest.approx(tcp.total_s)
    assert tcp.markers == {"primary serves it": 0.03}
    assert "wire" in tcp.segments[1].seen and "log" in tcp.segments[3].seen
    xot = phases[XOT]
    assert [s.name for s in xot.segments][1] == "NOTIFY -> connect"
    assert xot.notes == [
        "no SOA query on the wire: it travels inside TLS, with the TLS handshake, between "
        "connect and the transfer's start"
    ]


def test_a_logged_duration_past_served_is_not_drawn(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, "r", None, META) as store:
        store.append(record("r", TCP, 0, 0.1, server_logged={"secondary": {"duration_s": 0.2}}))
    (item,) = load_report_data(store.folder).phases
    assert [s.name.rsplit(" -> ")[-1] for s in item.segments][-2:] == ["connect", "served"]
    assert any("more than connect to served" in note for note in item.notes)
    assert all(s.seconds >= 0 for s in item.segments)


# --- did the link do what was asked -------------------------------------------------------


def test_link_check_sums_the_case_and_tests_the_sums(tmp_path: Path) -> None:
    data = load_report_data(make_run(tmp_path))
    checks = {(c.case, c.path): c for c in data.links}
    tcp = checks[(TCP, "link")]
    n = len(DURATIONS[TCP])
    assert tcp.transfers == n and tcp.cases == 1
    assert tcp.rtt_s == pytest.approx(0.020)  # 10 ms each way
    assert tcp.rtt_min_s == pytest.approx(min(RTT_MS[:n]) / 1000)
    assert tcp.rtt_verdict == "as set"
    forward, reverse = tcp.directions
    assert (forward.way, forward.packets, forward.dropped) == ("forward", 1000 * n, 10 * n)
    assert forward.measured_pct == pytest.approx(1.0)
    assert forward.verdict == check_loss(LossSpec(p=1.0), 990 * n, 10 * n).verdict == "ok"
    assert forward.expected_drops == pytest.approx(10 * n)
    assert (reverse.packets, reverse.dropped) == (1000 * n, 100 * n)
    assert reverse.verdict == "implausible"  # 10 % dropped where 1 % was asked
    assert forward.rate_bps == RATE and forward.measured_rate_bps == pytest.approx(RATE)
    assert forward.rate_verdict == "at the rate" and reverse.rate_bps is None
    # the cases whose paths were configured alike, summed: their counts add up
    total = checks[(f"all {len(DURATIONS)} cases", "link")]
    transfers = sum(len(d) for d in DURATIONS.values())
    assert total.cases == len(DURATIONS) and total.transfers == transfers
    assert total.directions[0].packets == 1000 * transfers
    assert total.rtt_min_s == pytest.approx(min(RTT_MS) / 1000)


def test_link_check_tests_before_it_says_too_few(tmp_path: Path) -> None:
    # The demo's tiny zone at 0.1 % loss: 1,251 packets expect 1.25 drops, too few to say
    # anything about a plausible count, but 100 drops are no 0.1 % loss.
    thin = {"forward": direction(0.010, 0.1), "reverse": direction(0.010, 0.1)}
    with RunStore.create(tmp_path, "r", None, META) as store:
        link = {"forward": link_entry(1151, 100), "reverse": link_entry(1250, 1)}
        store.append(record("r", TCP, 0, 0.5, extra={"link": link}))
    write_cases(store.folder, [case_meta(TCP, "tcp", {"secondary": thin})])
    (check,) = load_report_data(store.folder).links
    forward, reverse = check.directions
    assert forward.verdict == "implausible", forward.sentence
    assert reverse.verdict == "too few packets", reverse.sentence


# --- how close to the bound ---------------------------------------------------------------


def test_bound_only_where_the_transfer_reaches_steady_state(tmp_path: Path) -> None:
    data = load_report_data(make_run(tmp_path))
    rows = {r.case: r for r in data.bounds}
    tcp = rows[TCP]
    assert tcp.timed_from == "connect"
    rates = [ZONE_BYTES * 8 / (d - 0.042) for d in DURATIONS[TCP]]
    assert tcp.throughput_bps == pytest.approx(statistics.median(rates))
    assert tcp.bound_bps == BOUND["model"] and tcp.limited_by == "rate"
    assert tcp.rtt_s == pytest.approx(0.020)
    bdp = BOUND["model"] * 0.020 / 8
    assert tcp.bdp_bytes == pytest.approx(bdp) and tcp.bdps == pytest.approx(ZONE_BYTES / bdp)
    assert tcp.steady and tcp.ratio == pytest.approx(tcp.throughput_bps / BOUND["model"])
    assert (tcp.sender_cc, tcp.receiver_cc) == ("cubic", "cubic")
    assert tcp.advertised_window == 65536 + 1024 * 2  # the median of 65536 + 1024 x repeat
    assert (tcp.receive_buffer, tcp.send_buffer) == (6291456, 4194304)
    tiny = rows[TINY]
    assert not tiny.steady and tiny.bdps == pytest.approx(200 / bdp)


# --- the page and the terminal ------------------------------------------------------------


def test_first_screen_of_the_page_holds_the_numbers(tmp_path: Path) -> None:
    folder = make_run(tmp_path)
    data = load_report_data(folder)
    page = render_html(data)
    # the answers come before the details
    order = [
        page.index(f'id="{name}"')
        for name in ("q-transports", "q-phases", "q-link", "q-bound", "cases-section", "run")
    ]
    assert order == sorted(order)
    parsed = Tables(page)
    tables = {name: parsed.rows(name) for name in parsed.tables}
    rows = {a["data-group"]: cells for a, cells in parsed.rows("transport-costs", "data-group")}
    cells = {c["data-transport"]: (c, text) for c, text in rows[f"{PAIR}/axfr"][1:]}
    tsig = next(c for c in data.transports[0].costs if c.transport == "tcp-tsig")
    attrs, text = cells["tcp-tsig"]
    assert float(attrs["data-index"]) == pytest.approx(tsig.index)
    assert text.startswith(f"{tsig.index:.0f} ±{tsig.spread:.0f}")
    assert "p 0.0079 *" in text
    assert "no XoT" in cells["xot-tsig"][1]
    assert re.search(r'class="flag"[^>]*>drift<', page)
    # the link: the sums over the cases first, then each case; one without a result says why
    total, unsupported = tables["link-totals"]
    assert unsupported[0]["data-case"] == XOT_TSIG
    assert "unsupported:" in unsupported[1][-1][1]
    dropped = {c["class"].split()[-1]: c for c, _ in total[1] if "data-dropped" in c}
    transfers = sum(len(d) for d in DURATIONS.values())
    assert dropped["dropped-forward"]["data-packets"] == str(1000 * transfers)
    assert any(text == "implausible" for _, text in total[1])
    per_case = {a["data-case"]: c for a, c in tables["link-check"]}
    assert [text for c, text in per_case[TCP] if "rtt-measured" in c["class"]] == ["20.3 ms as set"]
    # the bound: steady rows, then the too-short ones behind their sentence
    bound_rows = {a["data-case"]: c for a, c in tables["bounds"]}
    of_bound = next(c for c, _ in bound_rows[TCP] if "of-bound" in c["class"])
    assert float(of_bound["data-value"]) == pytest.approx(data.bounds[0].ratio)
    assert TINY not in bound_rows
    assert TINY in {a["data-case"] for a, _ in tables["bounds-short-table"]}
    assert "1 of 6 cases is too short" in " ".join(page.split())
    # phases: the figure's series and the numbers table
    series = json.loads(re.search(r'id="fig-phases-series">(.*?)</script>', page).group(1))
    first = next(c for c in series["cases"] if c["case"] == TCP)
    assert [s["seconds"] for s in first["segments"]] == pytest.approx(
        [s.seconds for s in data.phases[0].segments]
    )


def test_terminal_summary_answers_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    folder = make_run(tmp_path)
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.index("What each transport costs") < out.index("cases (ok")
    assert "111 ±" in out and "p0.0079*" in out
    assert "Where the time went" in out and "transfer starts (log)" in out
    assert "implausible" in out and "all 6 cases" in out
    assert "1 of 6 too short to judge" in out
    # no case name is cut into a look-alike: every one appears whole (after the shared part)
    assert "every case is BIND → BIND · *" in out
    for case in DURATIONS:  # each whole, in words: "tld · TCP · AXFR"
        assert readable(case.removeprefix("bind-bind/")) in out


# --- a real run -------------------------------------------------------------------------

QUICK = Path(__file__).parent.parent / "fixtures" / "runs" / "report-quick"


def test_a_real_quick_run(tmp_path: Path) -> None:
    """scenarios/quick.toml's AXFR cases as they ran here (BIND 9.18 to itself, 20 ms RTT,
    0.1 % loss; records trimmed of what the report does not read): the first screen's
    numbers, recomputed from its records."""
    import shutil

    folder = shutil.copytree(QUICK, tmp_path / "quick")
    data = load_report_data(folder)
    lines = (folder / "transfers.jsonl").read_text().splitlines()
    records = [TransferRecord.from_json(line) for line in lines]
    by_case: dict[str, list[TransferRecord]] = {}
    for item in records:
        by_case.setdefault(item.case, []).append(item)
    assert len(data.transports) == 2
    for group in data.transports:
        zone = group.key.split("/")[1]
        base = statistics.median(
            r.duration_s for r in by_case[f"bind-bind/{zone}/tcp/axfr"] if r.duration_s
        )
        for cost in group.costs:
            durations = [r.duration_s for r in by_case[f"bind-bind/{zone}/{cost.transport}/axfr"]]
            assert cost.index == pytest.approx(100 * statistics.median(durations) / base)
            assert cost.n == 3
            assert cost.transport == "tcp" or not cost.testable  # 3 against 3: p >= 0.1
    for phases in data.phases:
        mine = sorted(by_case[phases.case], key=lambda r: r.duration_s or 0)
        median = mine[1]
        assert (phases.repeat, phases.duration_s) == (median.repeat, median.duration_s)
        assert phases.offset_s == median.phases["notify_sent"]
        assert sum(s.seconds for s in phases.segments) == pytest.approx(phases.total_s)
        assert all(s.seconds >= 0 for s in phases.segments)
    (total,) = [c for c in data.links if c.cases > 1]
    assert total.cases == 8 and total.rtt_s == pytest.approx(0.020)
    for way, check in zip(("forward", "reverse"), total.directions, strict=True):
        entries = [r.extra["link"][way] for r in records]
        assert check.packets == sum(e["emulated"] for e in entries)
        assert check.dropped == sum(e["dropped_loss"] for e in entries)
        assert (
            check.verdict
            == check_loss(LossSpec(p=0.1), check.packets - check.dropped, check.dropped).verdict
        )
    assert total.rtt_min_s == pytest.approx(
        min(r.extra["tcp"]["rtt_ms_min"] for r in records) / 1e3
    )
    assert total.rtt_verdict == "as set"
    for row in data.bounds:  # small zones on a 20 ms path: none reaches steady state
        bound = statistics.median(
            r.bound["model"] for r in by_case[row.case] if "receive_buffer" in r.bound
        )
        assert row.bound_bps == pytest.approx(bound)
        assert row.bdps == pytest.approx(row.bytes / (bound * 0.020 / 8))
        assert not row.steady and row.ratio is not None
