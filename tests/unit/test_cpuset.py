"""CPU placement: the decision (pure) and the cpuset groups it makes, on a fake cgroup tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.observe import cgroup
from harness.observe.cgroup import Cgroup, Layout
from harness.observe.cpuset import cpu_list, cpu_text, plan_placement
from harness.run.runner import NETNS, cpu_placement


def test_cpu_lists_read_and_written_as_the_kernel_does() -> None:
    assert cpu_list("0-2,5,7-8\n") == [0, 1, 2, 5, 7, 8]
    assert cpu_list("") == []
    assert cpu_text([8, 7, 5, 2, 1, 0]) == "0-2,5,7-8"
    assert cpu_text([3]) == "3"


def test_two_cpus_are_shared_and_said_so() -> None:
    placement = plan_placement([0, 1], "v1", "/sys/fs/cgroup/cpuset")
    assert placement.isolation == "shared" and placement.server_cpus is None
    assert "2 CPUs, fewer than 4" in placement.reason and "shared" in placement.reason
    assert placement.to_json()["online"] == "0-1" and placement.to_json()["servers"] is None


def test_four_or_more_cpus_split_a_quarter_for_the_harness() -> None:
    four = plan_placement([0, 1, 2, 3], "v2", "/sys/fs/cgroup")
    assert (four.isolation, four.harness, four.servers) == ("disjoint", [0], [1, 2, 3])
    assert four.server_cpus == "1-3" and four.method == "cgroup-v2 cpuset"
    eight = plan_placement(list(range(8)), "v1", "/c/cpuset")
    assert (eight.harness, eight.server_cpus) == ([0, 1], "2-7")
    assert not set(eight.harness) & set(eight.servers)


def test_without_a_cpuset_controller_they_share() -> None:
    for kind, root in (("v2", None), ("proc", None)):
        placement = plan_placement([0, 1, 2, 3, 4, 5], kind, root)
        assert placement.isolation == "shared" and "no cpuset controller" in placement.reason


def test_layouts_find_the_cpuset_controller() -> None:
    v2 = cgroup.choose_layout(
        [cgroup.Mount("/sys/fs/cgroup", "cgroup2", frozenset())],
        {"/sys/fs/cgroup": "cpuset cpu io memory pids\n"},
    )
    assert v2.cpuset_root == "/sys/fs/cgroup"
    bare = cgroup.choose_layout(
        [cgroup.Mount("/sys/fs/cgroup", "cgroup2", frozenset())],
        {"/sys/fs/cgroup": "cpu memory\n"},
    )
    assert bare.kind == "v2" and bare.cpuset_root is None
    hybrid = cgroup.choose_layout(
        [
            cgroup.Mount("/c/cpu,cpuacct", "cgroup", frozenset({"rw", "cpu", "cpuacct"})),
            cgroup.Mount("/c/memory", "cgroup", frozenset({"rw", "memory"})),
            cgroup.Mount("/c/cpuset", "cgroup", frozenset({"rw", "cpuset"})),
        ],
        {},
    )
    assert (hybrid.kind, hybrid.cpuset_root) == ("v1", "/c/cpuset")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_v1_cpuset_group_gets_cpus_and_mems_parents_first(tmp_path: Path) -> None:
    roots = {name: tmp_path / name for name in ("cpuacct", "memory", "cpuset")}
    _write(roots["cpuset"] / "cpuset.cpus", "0-7\n")
    _write(roots["cpuset"] / "cpuset.mems", "0\n")
    layout = Layout("v1", str(roots["cpuacct"]), str(roots["memory"]), "test", str(roots["cpuset"]))
    group = Cgroup.create("xfb-1-primary", layout, "2-7")
    parent, child = roots["cpuset"] / "xfrbench", roots["cpuset"] / "xfrbench" / "xfb-1-primary"
    assert (parent / "cpuset.cpus").read_text() == "0-7"  # the parent holds every child's
    assert (parent / "cpuset.mems").read_text() == "0"
    assert (child / "cpuset.cpus").read_text() == "2-7"
    assert (child / "cpuset.mems").read_text() == "0"
    assert str(child / "cgroup.procs") in group.procs_files
    assert len(group.procs_files) == 3
    assert group.paths == cgroup.cgroup_dirs("xfb-1-primary", layout, cpuset=True)


def test_no_cpus_no_cpuset_group(tmp_path: Path) -> None:
    roots = {name: tmp_path / name for name in ("cpuacct", "memory", "cpuset")}
    layout = Layout("v1", str(roots["cpuacct"]), str(roots["memory"]), "test", str(roots["cpuset"]))
    group = Cgroup.create("xfb-1-primary", layout)
    assert not roots["cpuset"].exists() and len(group.procs_files) == 2


def test_v2_cpuset_enables_the_controller_above_the_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    enabled: list[tuple[str, str]] = []
    monkeypatch.setattr(cgroup, "_enable", lambda d, c: enabled.append((d, c)))
    layout = Layout("v2", str(tmp_path), str(tmp_path), "test", str(tmp_path))
    group = Cgroup.create("xfb-2-seoul-1", layout, "1-3")
    parent = str(tmp_path / "xfrbench")
    assert (str(tmp_path), "cpuset") in enabled and (parent, "cpuset") in enabled
    assert (tmp_path / "xfrbench" / "xfb-2-seoul-1" / "cpuset.cpus").read_text() == "1-3"
    assert group.procs_files == [str(tmp_path / "xfrbench" / "xfb-2-seoul-1" / "cgroup.procs")]


def test_cpus_without_a_cpuset_controller_is_refused(tmp_path: Path) -> None:
    layout = Layout("v2", str(tmp_path), str(tmp_path), "test")
    with pytest.raises(Exception, match="no cpuset controller"):
        Cgroup.create("g", layout, "1-3")


def test_servers_on_an_inventorys_hosts_are_not_said_to_share_the_harnesss_cores() -> None:
    # run --inventory (remote fleets): the cores of this host are the harness's alone.
    placement = cpu_placement(NETNS, remote=True)
    assert placement.isolation == "remote" and placement.server_cpus is None
    assert "inventory's hosts" in placement.reason and "shared" not in placement.reason
