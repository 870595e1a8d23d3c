"""Fleets on real servers whose figures must not flatter: a site cut off by 100 % loss (the
fleet did not converge: "2 of 3 served", no last time), after its first copy or from the
start (one host down: it is missing in its server's words, the others measured and
counted), and a BIND primary refusing transfers for want of a slot (transfers-out = 1: the
refusals counted are the "quota reached" lines of its own log, counted here independently,
repeat by repeat).

The cut after the first copy and the refusals change the testbed after the first copies and
the warm-up, and before the measured repeats."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import spec
from harness.measure.first_copies import prepare_updates
from harness.plan.case import CasePlan, GroupPlan, plan_case
from harness.results.folder import read_run
from harness.results.model import TransferRecord
from harness.results.store import RunStore
from harness.run.runner import NETNS, resolve_binaries
from harness.run.session import GroupSession, RunContext

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]


def near_and_far(far: str, far_link: str, repeats: int, origin: str, timeout: str = "10s") -> str:
    """Two BIND secondaries at site near and one at site `far` behind `far_link`."""
    return f"""
repeats = {repeats}
timeout = "{timeout}"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 500
origin = "{origin}"
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[[secondaries]]
name = "near"
count = 2
link = {{ delay = "2ms" }}
[[secondaries]]
name = "{far}"
link = {far_link}
"""


# The lost site's repeat waits the whole timeout (10 s); the near ones serve 500 records
# in milliseconds.
LOST = near_and_far("far", '{ delay = "20ms" }', 1, "lost.example.")


# Knot secondaries retry a refused transfer only at their SOA retry timer (300 s), past the
# timeout: a refused one stays refused for its repeat, and answers the next NOTIFY.
# Each repeat waits the whole timeout for its refused ones: 10 s, more than twice the
# three transfers one after another at the shaped 8 Mbit/s (1.4 MB each, about 1.4 s).
QUOTA = """
repeats = 2
timeout = "10s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 50000
origin = "quota.example."
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "knot"
[link]
delay = "5ms"
[[secondaries]]
name = "edge"
count = 3
"""
REFUSAL = "request denied: quota reached"


@contextlib.contextmanager
def visit(tmp_path: Path, scenario: str) -> Iterator[tuple[GroupSession, CasePlan]]:
    """The scenario's one case on a testbed of its own, its primary started; the test runs
    the slots (session.run), the first of which starts the secondaries."""
    path = tmp_path / "scenario.toml"
    path.write_text(scenario)
    loaded = spec.load(path)
    plan = plan_case(loaded.cases[0])
    binaries = resolve_binaries([plan], NETNS, loaded.path)[0][plan.name]
    with RunStore.create(tmp_path / "results", "fleet", None, {}) as store:
        run = RunContext(store.run_id, store.append, {plan.name: binaries}, NETNS)
        with GroupSession(GroupPlan((plan,)), store.folder / "cases" / "000", run) as session:
            assert session.live is not None and session.bed is not None
            yield session, plan


@contextlib.contextmanager
def warmed_up(tmp_path: Path, scenario: str) -> Iterator[tuple[GroupSession, CasePlan]]:
    """visit(), after its first copies and warm-up update, which reached every secondary;
    the test changes what it wants and runs the measured repeats (session.run)."""
    with visit(tmp_path, scenario) as (session, plan):
        assert session.live is not None
        prepared = prepare_updates(session.live)
        assert prepared.missing == {}
        session.serial = prepared.serial
        yield session, plan


def results(tmp_path: Path) -> tuple[list[TransferRecord], dict]:
    """The records and summary.json's fleet section of the one case."""
    folder = tmp_path / "results" / "fleet"
    _, records = read_run(folder)
    (case,) = json.loads((folder / "summary.json").read_text())["fleet"].values()
    return records, case


def test_a_site_behind_total_loss_leaves_the_fleet_2_of_3_served(tmp_path: Path) -> None:
    with warmed_up(tmp_path, LOST) as (session, plan):
        # From here on the far site is behind 100 % loss: the router drops every packet to
        # or from it (the rules go with the router's namespace).
        lost_host = next(h.name for h in plan.secondaries if h.site == "far")
        near = sorted(h.name for h in plan.secondaries if h.site == "near")
        assert session.bed is not None
        far = session.bed.hosts[lost_host].address
        for way in ("-s", "-d"):
            session.bed.router.run(["iptables", "-I", "FORWARD", "1", way, far, "-j", "DROP"])
        session.run(0, 1, 1, 0)
    records, case = results(tmp_path)
    assert sorted((r.host, r.counts) for r in records) == sorted(
        [(lost_host, False), *((host, True) for host in near)]
    )
    lost = next(r for r in records if r.host == lost_host)
    assert lost.failure == "timeout" and f"{lost_host} never served" in (lost.error or "")
    # The primary's NOTIFY to it left (the wire saw it): the repeat's origin may be it.
    assert "notify_sent" in lost.phases
    origin = min(r.phases["notify_sent"] for r in records)
    (repeat,) = case["repeats"]
    assert repeat["served_of"] == "2 of 3 served" and not repeat["converged"]
    assert repeat["last_s"] is None and repeat["p95_s"] is None and repeat["last_site"] is None
    assert [m["host"] for m in repeat["missing"]] == [lost_host]
    assert "timed out" in repeat["missing"][0]["failure"]
    served = sorted(r.duration_s + r.phases["notify_sent"] - origin for r in records if r.counts)
    assert repeat["first_s"] == pytest.approx(served[0], abs=1e-5)
    assert repeat["p50_s"] == pytest.approx(served[1], abs=1e-5)  # rank 2 of 3
    assert case["median_last_s"] is None and case["converged"] == "0 of 1 repeats converged"


# One host down from the start: its site behind 100 % loss both ways. The timeout outlasts
# BIND's first words (its SOA query's retries run out 30 s after its start).
GONE = near_and_far("gone", '{ delay = "20ms", loss = "100%" }', 2, "dead.test.", "40s")


def test_a_site_unreachable_from_the_start_leaves_the_fleet_2_of_3_served(
    tmp_path: Path,
) -> None:
    """One host down from the start (issue 28): the first copies wait for it one timeout
    after the near ones served theirs (not the whole start allowance), then the near
    secondaries are measured and counted in every repeat, and the gone one is missing in
    its own server's words."""
    with visit(tmp_path, GONE) as (session, plan):
        for repeat in (1, 2):
            session.run(0, repeat, repeat, 0)
        assert session.live is not None and session.broken is None
        gone = session.live.secondaries["gone"]
        log = gone.server.log_path.read_text().splitlines()
        primary = session.live.primary.place.address if session.live.primary else None
    records, case = results(tmp_path)
    near = sorted(h.name for h in plan.secondaries if h.site == "near")
    assert sorted((r.repeat, r.host, r.counts) for r in records) == sorted(
        (repeat, host, host != "gone") for repeat in (1, 2) for host in [*near, "gone"]
    )
    # The near secondaries' copies were verified against the primary's, record by record.
    for record in records:
        if record.host != "gone":
            assert record.ok and record.verified and record.duration_s is not None
            assert record.extra["zone_records"] == record.records
    # BIND's own first failure line since its start: its SOA queries to the primary that
    # never answered ran out of retries (its first failure, 30 s after its start).
    failing = [line for line in log if f"primary {primary}#53 exceeded" in line]
    assert failing, log
    for record in records:
        if record.host == "gone":
            assert record.failure == "timeout" and not record.verified
            assert record.error == (
                "missing: never got its first copy: timeout 40 s after another secondary's "
                "copy: the gone never served dead.test. serial 1"
            )
            words = record.extra["missing"]["secondary_failures"]
            assert words["first_failure_line"] == failing[0]
            assert words["timed_out"] >= len(failing)
    repeats = case["repeats"]
    assert [r["repeat"] for r in repeats] == [1, 2]
    for repeat in repeats:
        assert repeat["served_of"] == "2 of 3 served" and not repeat["converged"]
        # The fleet did not converge: no last or p95 time; the 2nd of 3 did serve.
        assert repeat["last_s"] is None and repeat["p95_s"] is None
        assert repeat["p50_s"] == max(repeat["times"].values())
        assert sorted(repeat["times"]) == near
        (missing,) = repeat["missing"]
        assert (missing["host"], missing["site"]) == ("gone", "gone")
        assert missing["server_said"] == failing[0]
    assert case["converged"] == "0 of 2 repeats converged" and case["median_last_s"] is None
    # The near site is measured; the gone site's row says it served nothing.
    sites = {s["site"]: s for s in case["sites"]}
    assert (sites["near"]["ok"], sites["near"]["transfers"]) == (4, 4)
    assert sites["near"]["median_s"] is not None
    assert (sites["gone"]["ok"], sites["gone"]["median_s"]) == (0, None)


def stamp(line: str) -> float:
    """A BIND line's time (print-time iso8601: local time, milliseconds)."""
    return datetime.datetime.fromisoformat(line.split(" ", 1)[0]).timestamp()


def test_refusals_counted_are_the_quota_reached_lines_of_the_primarys_log(
    tmp_path: Path,
) -> None:
    with warmed_up(tmp_path, QUOTA) as (session, _):
        # From here on one transfer at a time (BIND's own reconfiguration), sent at
        # 8 Mbit/s: a transfer (1.4 MB) outlasts BIND's half-second NOTIFY ticks, and the
        # next secondaries' requests meet a full quota.
        primary = session.live.primary if session.live else None
        assert primary is not None
        primary.server.setup.options["transfers-out"] = 1
        primary.server.render()
        primary.place.run(primary.server.reconfig_argv())
        assert session.bed is not None
        host = session.bed.hosts[primary.name]  # the testbed's own: its link shaped below
        (device,) = host.interfaces
        host.run(["tc", "qdisc", "replace", "dev", device, "root", "tbf",
                          "rate", "8mbit", "burst", "32kb", "latency", "2s"])  # fmt: skip
        for repeat in (1, 2):
            session.run(0, repeat, repeat, 0)
        log_path = primary.server.log_path
    records, case = results(tmp_path)
    assert len(records) == 2 * 3
    starts = sorted({r.started_at for r in records})
    log = log_path.read_text().splitlines()
    quota = [stamp(line) for line in log if line.endswith(REFUSAL)]
    counted = {r["repeat"]: r["refusals"] for r in case["repeats"]}
    for repeat, start in enumerate(starts, 1):
        end = starts[repeat] if repeat < len(starts) else float("inf")
        lines = sum(1 for at in quota if start <= at < end)
        assert counted[repeat] == lines, (repeat, counted, quota, starts)
        for record in records:
            if record.repeat == repeat:
                assert record.server_logged["primary_refusals"]["server"] == "bind"
    assert case["refusals"] == sum(1 for at in quota if at >= starts[0])
    assert case["refusals"] > 0  # the quota was met: the count is of something
    # Each refused secondary is missing from its repeat, in its own words.
    for repeat in case["repeats"]:
        assert repeat["served"] + len(repeat["missing"]) == 3
