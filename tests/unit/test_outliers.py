"""Outliers in words (report/outliers.py): one of five repeats met a retransmission timeout;
its transport cell keeps the median ratio with the others' spread and a mark, and a line
names the repeat and what its record says happened."""

from __future__ import annotations

from typing import Any

import pytest

from harness.report.html import index_text, transport_notes
from harness.report.outliers import MARK, far_one, records_say
from harness.report.transport_costs import transport_costs
from harness.results.model import TransferRecord
from tests.unit.test_report import record

TCP, XOT = (
    "bind-bind/preset=tld,records=10000/tcp/axfr",
    "bind-bind/preset=tld,records=10000/xot/axfr",
)
DROPPED = {"secondary forward": {"passed": 400, "dropped": 2, "dropped_loss": 2}}


@pytest.mark.parametrize(
    ("values", "far"),
    [
        ([0.30, 0.31, 1.10, 0.29, 0.30], 2),  # one RTO
        ([0.30, 0.31, 0.32, 0.29, 0.30], None),  # none
        ([0.30, 1.10, 1.12, 0.29, 0.30], None),  # two alike: a mode, not an accident
        ([0.30, 1.10, 0.31], None),  # too few to say what the rest is
        ([0.30, 0.45, 0.31, 0.29], None),  # slower, not far
    ],
)
def test_far_one(values: list[float], far: int | None) -> None:
    assert far_one(values) == far


def _run(xot_extra: dict[str, Any], **logged: Any) -> list[TransferRecord]:
    records = []
    for repeat, duration in enumerate([0.20, 0.21, 0.22, 0.20, 0.21]):
        records.append(record("r", TCP, repeat, duration_s=duration, transport="tcp"))
    for repeat, duration in enumerate([0.30, 0.31, 1.41, 0.29, 0.30]):
        far = repeat == 2
        records.append(
            record(
                "r",
                XOT,
                repeat,
                duration_s=duration,
                transport="xot",
                extra=xot_extra if far else {},
                server_logged=logged if far else {},
            )
        )
    return records


def test_the_cell_gives_the_others_spread_and_a_line_says_what_happened() -> None:
    wire = {"soa_queries": 1, "syns": 1, "connections": 1, "soa_query_s": 0.01}
    (group,) = transport_costs(_run({"link": DROPPED, "wire": wire}))
    xot = next(c for c in group.costs if c.transport == "xot")
    assert xot.index == pytest.approx(100 * 0.30 / 0.21)
    (far,) = xot.outliers
    assert (far.repeat, far.value_s) == (2, 1.41)
    assert xot.ci is not None and xot.ci_others is not None
    # the whole interval is stretched by the one repeat; the others' is what one can use
    assert xot.ci[1] - xot.ci[0] > 3 * (xot.ci_others[1] - xot.ci_others[0])
    cell = index_text(xot)
    assert cell.endswith(MARK) and cell.startswith("143 ±")
    assert int(cell.split("±")[1].rstrip(MARK)) < 30
    (line,) = [n for n in transport_notes([group]) if n.startswith(MARK)]
    assert line.startswith(f"{MARK} BIND → BIND · tld 10 k · XoT · AXFR: repeat 2 (secondary)")
    assert "took 1.41 s against 300 ms for the others" in line
    assert "retransmission timeout: the link dropped 2 packets (→ 2, ← 0)" in line


def test_a_retry_is_named_with_its_wait() -> None:
    wire = {"soa_queries": 1, "syns": 2, "connections": 2}
    far = _run({"wire": wire}, secondary_failures={"timed_out": 1, "retry": 1})[7]
    said = records_say(far, 1.11)
    assert said.startswith("retry after 1.1 s: ")
    assert "it opened 2 connections" in said and "timed out x1, retry x1" in said


def test_nothing_said_is_said_too() -> None:
    far = _run({})[7]
    assert records_say(far, 1.11) == (
        "nothing in the records explains it: no drop on the link, no second connection, "
        "no failure logged"
    )
    (group,) = transport_costs(_run({}))
    tcp = next(c for c in group.costs if c.transport == "tcp")
    assert not tcp.outliers and not index_text(tcp).endswith(MARK)


def test_one_dropped_packet_is_said_in_the_singular() -> None:
    one = {"secondary forward": {"passed": 400, "dropped": 1, "dropped_loss": 1}}
    far = _run({"link": one, "wire": {"soa_queries": 1, "syns": 1, "connections": 1}})[7]
    assert "the link dropped 1 packet (→ 1, ← 0)" in records_say(far, 0.25)
