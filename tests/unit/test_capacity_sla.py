"""The capacity SLA as users write it, its figure per repeat, and a step's verdict."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from harness.capacity.sla import Sla, call, median_interval, parse_sla, repeat_figures
from harness.core.errors import UserInputError
from harness.results.model import TransferRecord


def record(host: str, repeat: int, duration: float | None, notify: float = 0.0) -> TransferRecord:
    ok = duration is not None
    return TransferRecord(
        run_id="r", case="bind-knot/tcp/axfr", repeat=repeat, primary_kind="bind",
        secondary_kind="knot", host=host, site="edge", transport="tcp", xfr="axfr",
        zone="example.", serial=10 + repeat, records=100, bytes=8_000, messages=1,
        duration_s=duration, started_at=1.0, ok=ok, error=None if ok else "timeout after 20 s",
        verified=ok, failure=None if ok else "timeout", trigger="notify",
        phases={"notify_sent": notify}, extra={}, bound={},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("p95 load time 30s", Sla("load", 30.0, 95.0)),
        ("P50  load time 2m", Sla("load", 120.0, 50.0)),
        ("all served 60s", Sla("all", 60.0)),
        ("all served 500ms", Sla("all", 0.5)),
        ("no failures", Sla("no-failures")),
    ],
)
def test_the_sla_as_users_write_it(text: str, expected: Sla) -> None:
    assert parse_sla(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("p95 load time soon", "'soon' in 'p95 load time soon' is not a time"),
        ("p0 load time 30s", "p0 in 'p0 load time 30s' is no share of the fleet"),
        ("fast enough", "'fast enough' is not an SLA"),
        ("all served -3s", "is not a time"),
    ],
)
def test_a_wrong_sla_is_an_exit_2_error_naming_the_flag_and_its_forms(text: str, says: str) -> None:
    with pytest.raises(UserInputError) as caught:
        parse_sla(text)
    assert caught.value.exit_status == 2 and caught.value.key == "--sla"
    assert says in str(caught.value)
    assert caught.value.fix


def test_describe_gives_back_what_the_answer_line_prints() -> None:
    assert parse_sla("p95 load time 30s").describe() == "p95 load time 30 s"
    assert parse_sla("all served 1m").describe() == "all served 60 s"


def records(times: dict[int, list[float | None]]) -> list[TransferRecord]:
    return [
        record(f"edge-{i + 1}", repeat, t)
        for repeat, values in times.items()
        for i, t in enumerate(values)
    ]


def test_figures_are_one_per_repeat_over_the_whole_fleet() -> None:
    runs = records({1: [1.0, 2.0, 3.0, 4.0], 2: [1.0, 2.0, None, 5.0]})
    # p50 of 4: the 2nd; p95 of 4: the 4th, never reached in repeat 2 (one never served).
    assert repeat_figures(parse_sla("p50 load time 3s"), runs) == [2.0, 2.0]
    assert repeat_figures(parse_sla("p95 load time 3s"), runs) == [4.0, math.inf]
    assert repeat_figures(parse_sla("all served 3s"), runs) == [4.0, math.inf]
    assert repeat_figures(parse_sla("no failures"), runs) == [0.0, 1.0]


def test_the_median_interval_is_min_and_max_for_few_repeats_and_narrows_with_more() -> None:
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)
    assert median_interval([float(x) for x in range(1, 10)]) == (3.0, 7.0)


def test_a_step_passes_fails_or_is_too_noisy_to_call() -> None:
    sla = parse_sla("p95 load time 30s")
    assert call(sla, [10.0, 12.0, 11.0]).verdict == "pass"
    failed = call(sla, [40.0, math.inf, 50.0])
    assert (failed.verdict, failed.figure, failed.high) == ("fail", 50.0, None)
    noisy = call(sla, [10.0, 12.0, 45.0])
    assert (noisy.verdict, noisy.met, noisy.note(sla)) == (
        "noisy", 2, "2 of 3 repeats met p95 load time 30 s",
    )  # fmt: skip
    # Nine repeats: one outlier no longer makes the step noisy.
    many: list[Any] = [10.0] * 8 + [45.0]
    assert call(sla, many).verdict == "pass"
    assert call(sla, []).verdict == "fail"


def test_records_outside_a_fleet_have_a_figure_per_repeat_too() -> None:
    runs = [dataclasses.replace(r, site=None) for r in records({1: [1.0, 2.0], 2: [1.0, None]})]
    assert repeat_figures(parse_sla("all served 3s"), runs) == [2.0, math.inf]
    assert repeat_figures(parse_sla("p50 load time 3s"), runs) == [1.0, 1.0]
