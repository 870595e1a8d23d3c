"""Refusing a scenario whose largest case cannot fit in the host's memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import spec
from harness.cli import main
from harness.core.errors import UserInputError
from harness.plan.capacity import check_memory, host_memory_bytes, memory_need
from harness.plan.case import plan_case
from harness.servers import DIALECTS

GIB = 2**30


def _plans(tmp_path: Path, text: str) -> list:  # type: ignore[type-arg]
    path = tmp_path / "s.toml"
    path.write_text(text)
    return [plan_case(case) for case in spec.load(path).cases]


def test_a_case_needs_each_of_its_servers_footprint(tmp_path: Path) -> None:
    (plan,) = _plans(
        tmp_path,
        '[zones]\npreset = "tld"\nrecords = 100000\n[[secondaries]]\nname = "a"\ncount = 3\n'
        '[[secondaries]]\nname = "b"\nkind = "knot"\n',
    )
    need = memory_need(plan)
    bind = DIALECTS["bind"].footprint.bytes_for(100_000, 1)
    knot = DIALECTS["knot"].footprint.bytes_for(100_000, 1)
    assert need.per_secondary == {"bind": (3, bind), "knot": (1, knot)}
    assert need.total_bytes == pytest.approx(bind * 4 + knot)  # the BIND primary too


def test_a_fleet_too_large_for_the_host_is_refused_with_the_key_and_fix(tmp_path: Path) -> None:
    text = '[zones]\npreset = "tld"\nrecords = 1000000\n[[secondaries]]\nname = "edge"\n'
    small, large = _plans(tmp_path, text + "count = 4\n"), _plans(tmp_path, text + "count = 64\n")
    check_memory(small, 24 * GIB, "s.toml")  # 5 x ~0.5 GiB fits
    with pytest.raises(UserInputError) as info:
        check_memory(large, 24 * GIB, "s.toml")
    error = info.value
    assert error.key == "secondaries" and "lower a site's count" in (error.fix or "")
    assert "64 bind secondaries x ~509 MiB" in str(error) and "24.0 GiB" in str(error)
    check_memory(large, 0, "s.toml")  # memory unknown: not refused on a guess


def test_host_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemFree:        1 kB\n")
    assert host_memory_bytes(meminfo) == 24576000 * 1024
    assert host_memory_bytes(tmp_path / "missing") == 0


def test_dry_run_refuses_it_with_exit_status_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "huge.toml"
    # 2,000 secondaries of a 1 M-record zone: about 1 TB, more than any test machine has.
    path.write_text(
        '[zones]\npreset = "tld"\nrecords = 1000000\n[[secondaries]]\nname = "edge"\ncount = 2000\n'
    )
    assert main(["run", "--dry-run", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: secondaries: case bind-bind/tcp/axfr needs about" in err
