"""Run folders of every format version load through the one reader, in report and compare.

Fixtures: report-legacy (the first harness: run.json without meta_version, records of
format 1), report-quick (format 1 with meta_version 2) and fleet-v1 (format 1 written on
2026-11-25 by the harness before records named their host: a fleet of three on two sites,
the host and site in `extra`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.compare.gate import load_and_compare
from harness.core.errors import UserInputError
from harness.report.data import load_report_data
from harness.report.html import write_report
from harness.results import FORMAT_VERSION, TransferRecord, open_run
from harness.results.model import upgrade_record

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
OLD = ["report-legacy", "report-quick", "fleet-v1", "20250101T000000Z-abc123"]


@pytest.mark.parametrize("name", OLD)
def test_old_run_folders_load_in_the_reader_the_report_and_compare(
    name: str, tmp_path: Path
) -> None:
    folder = shutil.copytree(RUNS / name, tmp_path / name)
    run = open_run(folder)
    assert run.records and all(r.format_version == FORMAT_VERSION for r in run.records)
    data = load_report_data(folder)
    assert data.cases and write_report(data, tmp_path / "report.html").stat().st_size > 0
    result = load_and_compare(folder, folder)
    assert result.exit_status == 0


def test_a_fleet_of_format_1_names_its_hosts_and_sites() -> None:
    run = open_run(RUNS / "fleet-v1")
    places = {(r.host, r.site) for r in run.records}
    assert places == {("near-1", "near"), ("near-2", "near"), ("far", "far")}
    assert all("host" not in r.extra and "site" not in r.extra for r in run.records)
    assert {(r.primary_kind, r.secondary_kind) for r in run.records} == {("bind", "knot")}
    assert all(r.failure is None for r in run.records if r.counts)


def test_memory_of_old_runs_is_read_under_the_names_it_has_now() -> None:
    # fleet-v1's summary.json holds "peak_rss_bytes" (the cgroup's charged peak since the
    # server started, or more): read as the charged figure, with no anonymous peak.
    stored = json.loads((RUNS / "fleet-v1" / "summary.json").read_text())["resources"]
    data = load_report_data(RUNS / "fleet-v1")
    primaries = {item.case: item.roles["primary"] for item in data.resources}
    assert primaries and all(
        (r.charged_peak_bytes, r.anon_peak_bytes)
        == (stored[case]["primary"]["peak_rss_bytes"], None)
        for case, r in primaries.items()
    )
    # 20250101T000000Z-abc123 has samples with the old keys and no summary: a cgroup's
    # rss_bytes was its anonymous memory, peak_rss_bytes and memory_bytes what it was charged.
    run = open_run(RUNS / "20250101T000000Z-abc123")
    assert run.samples is not None
    servers = [s for s in run.samples if s["role"] != "link"]
    assert servers and all("rss_bytes" not in s and "peak_rss_bytes" not in s for s in servers)
    first = servers[0]
    assert (first["anon_bytes"], first["charged_bytes"], first["charged_peak_bytes"]) == (
        8_000_000,
        16_000_000,
        8_004_096,
    )
    (item, *_) = load_report_data(RUNS / "20250101T000000Z-abc123").resources
    lines = [s for s in servers if s["case"] == item.case and s["role"] == "primary"]
    assert item.roles["primary"].anon_peak_bytes == max(s["anon_bytes"] for s in lines)


def test_a_case_of_one_of_format_1_is_the_host_secondary_at_no_site() -> None:
    run = open_run(RUNS / "report-legacy")
    assert {(r.host, r.site) for r in run.records} == {("secondary", None)}


def test_format_1_failures_are_named_from_their_words() -> None:
    base = json.loads((RUNS / "report-legacy" / "transfers.jsonl").read_text().splitlines()[0])
    cases = {
        "timeout after 60 s: the secondary never served x. serial 3": "timeout",
        "timeout after 60 s: the primary never served x. serial 3 (dynamic update)": "publish",
        "RRSUM differs: expected 2 records (sum ab), the copy has 3 (sum cd)": "verification",
        "the secondary exited with status 1: ...": "server",
    }
    for error, failure in cases.items():
        data = base | {"ok": False, "verified": False, "error": error, "duration_s": None}
        assert upgrade_record(data)["failure"] == failure
        assert TransferRecord.from_dict(data).failure == failure
    unsupported = base | {"ok": False, "unsupported": True, "error": "unsupported: no XoT"}
    assert TransferRecord.from_dict(unsupported).failure == "unsupported"


def test_a_newer_format_is_refused_with_the_fix(tmp_path: Path) -> None:
    folder = shutil.copytree(RUNS / "report-legacy", tmp_path / "new")
    meta = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps(meta | {"format_version": FORMAT_VERSION + 1}))
    with pytest.raises(UserInputError, match="reads up to"):
        open_run(folder)


def test_what_is_not_a_run_folder_is_said(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="does not exist"):
        open_run(tmp_path / "nowhere")
    with pytest.raises(UserInputError, match="not a run folder"):
        open_run(tmp_path)
