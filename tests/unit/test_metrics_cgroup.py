"""cgroup layout detection, stat parsers, the attach wrapper and removal (no root needed).

Captured on the hybrid build VM: mountinfo_hybrid, cpuacct.stat, memory.stat.v1,
cpu.stat.v2, and v1group_* (a v1 group of its own after a 15 ms burst of CPU). The build VM
cannot produce a v2 memory controller, so the v2 mountinfo and memory.stat are written by
hand in the kernel's format (files named synthetic_*).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.observe import cgroup
from harness.observe.cgroup import Cgroup, CgroupUsage, Layout, Mount

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "proc"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_mountinfo_hybrid() -> None:
    mounts = {m.mountpoint: m for m in cgroup.parse_mountinfo(fixture("mountinfo_hybrid"))}
    assert mounts["/sys/fs/cgroup/unified"].fstype == "cgroup2"
    assert mounts["/sys/fs/cgroup/memory"] == Mount(
        "/sys/fs/cgroup/memory", "cgroup", frozenset({"rw", "memory"})
    )
    assert "cpuacct" in mounts["/sys/fs/cgroup/cpuacct"].options


def test_mountinfo_unescapes_mountpoints() -> None:
    line = r"40 31 0:37 / /mnt/a\040b rw - cgroup2 cgroup2 rw"
    (mount,) = cgroup.parse_mountinfo(line)
    assert mount.mountpoint == "/mnt/a b"


def test_layout_hybrid_uses_v1_when_v2_has_no_controllers() -> None:
    mounts = cgroup.parse_mountinfo(fixture("mountinfo_hybrid"))
    layout = cgroup.choose_layout(mounts, {"/sys/fs/cgroup/unified": ""})
    assert (layout.kind, layout.cpu_root, layout.memory_root) == (
        "v1",
        "/sys/fs/cgroup/cpuacct",
        "/sys/fs/cgroup/memory",
    )
    assert layout.roots == ["/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/memory"]


def test_layout_pure_v2() -> None:
    mounts = cgroup.parse_mountinfo(fixture("synthetic_mountinfo_v2"))
    layout = cgroup.choose_layout(mounts, {"/sys/fs/cgroup": "cpuset cpu io memory pids\n"})
    assert (layout.kind, layout.roots) == ("v2", ["/sys/fs/cgroup"])
    # Without the memory controller on offer (e.g. a container): the /proc fallback.
    assert cgroup.choose_layout(mounts, {"/sys/fs/cgroup": "cpu pids"}).kind == "proc"


def test_layout_v1_co_mounted_cpu_cpuacct() -> None:
    text = (
        "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
    )
    layout = cgroup.choose_layout(cgroup.parse_mountinfo(text), {})
    assert layout.cpu_root == "/sys/fs/cgroup/cpu,cpuacct" and layout.kind == "v1"
    assert cgroup.choose_layout([], {}).kind == "proc"


def test_cpu_parsers() -> None:
    assert cgroup.parse_cpu_stat_v2(fixture("cpu.stat.v2")) == (1722.564565, 698.50328)
    assert cgroup.parse_cpuacct_stat_v1(fixture("cpuacct.stat"), 100) == (1749.66, 709.49)
    assert cgroup.parse_cpuacct_stat_v1("user 250\nsystem 25\n", 250) == (1.0, 0.1)
    assert cgroup.parse_ns(fixture("v1group_cpuacct.usage")) == int(
        fixture("v1group_cpuacct.usage").strip()
    )


def _v1_ns(name: str) -> int:
    return int(fixture(f"v1group_cpuacct.{name}"))


def test_v1_figures_split_the_exact_total_by_the_ticks() -> None:
    # The captured group: its run time is exact, its user/system split moves per tick.
    runtime = _v1_ns("usage") / 1e9
    user_ticks, system_ticks = _v1_ns("usage_user"), _v1_ns("usage_sys")
    assert runtime % 0.004 != 0  # the point of the capture: a total off the tick grid
    user, system = cgroup.adjust_cputime(runtime, user_ticks, system_ticks, (0.0, 0.0))
    assert user + system == pytest.approx(runtime, abs=1e-12)
    assert user / system == pytest.approx(user_ticks / system_ticks)


def test_adjust_cputime_edges() -> None:
    assert cgroup.adjust_cputime(1.0, 3, 1, (0.0, 0.0)) == (0.75, 0.25)
    assert cgroup.adjust_cputime(1.0, 5, 0, (0.0, 0.0)) == (1.0, 0.0)
    assert cgroup.adjust_cputime(1.0, 0, 5, (0.0, 0.0)) == (0.0, 1.0)
    assert cgroup.adjust_cputime(1.0, 0, 0, (0.0, 0.0)) == (1.0, 0.0)  # not yet ticked
    # No new run time: the last split stands, whatever the ticks say now.
    assert cgroup.adjust_cputime(1.0, 1, 1, (0.75, 0.25)) == (0.75, 0.25)
    # The ratio turned over: user would go down from 0.75; it is held, system takes the rest.
    assert cgroup.adjust_cputime(1.1, 1, 3, (0.75, 0.25)) == pytest.approx((0.75, 0.35))


def test_adjust_cputime_never_goes_down_and_adds_up() -> None:
    import random

    rng = random.Random(12)
    runtime, user_ticks, system_ticks = 0.0, 0, 0
    split = (0.0, 0.0)
    for _ in range(2000):
        runtime += rng.choice([0.0, rng.random() * 0.01])
        # Ticks lag the run time and arrive in bursts, on either side.
        if rng.random() < 0.3:
            user_ticks += rng.choice([0, 4_000_000, 8_000_000])
            system_ticks += rng.choice([0, 4_000_000])
        new = cgroup.adjust_cputime(runtime, user_ticks, system_ticks, split)
        assert new[0] >= split[0] and new[1] >= split[1]
        assert sum(new) == pytest.approx(max(runtime, sum(split)), abs=1e-9)
        split = new


def test_memory_stat_anon() -> None:
    v1 = cgroup.parse_memory_stat(fixture("memory.stat.v1"))
    assert v1["rss"] == 7999488 and v1["total_rss"] == 990941184
    assert cgroup.anon_bytes(v1) == 990941184  # hierarchical figure first
    # rss counts transparent huge pages already (rss_huge is a part of it): not added twice.
    assert cgroup.anon_bytes({"rss": 8192, "rss_huge": 4096}) == 8192
    assert cgroup.anon_bytes({"rss": 4096}) == 4096
    v2 = cgroup.parse_memory_stat(fixture("synthetic_memory.stat.v2"))
    assert cgroup.anon_bytes(v2) == 5341184
    with pytest.raises(ValueError):
        cgroup.anon_bytes({"file": 1})


def test_cgroup_dirs_parents_first() -> None:
    layout = Layout("v1", "/c/cpuacct", "/c/memory", "test")
    assert cgroup.cgroup_dirs("xfb-1-primary", layout) == [
        "/c/cpuacct/xfrbench",
        "/c/cpuacct/xfrbench/xfb-1-primary",
        "/c/memory/xfrbench",
        "/c/memory/xfrbench/xfb-1-primary",
    ]
    v2 = Layout("v2", "/c", "/c", "test")
    assert cgroup.cgroup_dirs("a", v2) == ["/c/xfrbench", "/c/xfrbench/a"]
    for bad in ("", "a/b", "..", "."):
        with pytest.raises(ValueError):
            cgroup.cgroup_dirs(bad, v2)


def _fake_tree(tmp_path: Path, kind: str) -> Cgroup:
    """A cgroup directory tree of plain files holding the captured texts."""
    if kind == "v1":
        layout = Layout("v1", str(tmp_path / "cpuacct"), str(tmp_path / "memory"), "test")
        files = {
            **{
                f"cpuacct/xfrbench/g/cpuacct.{name}": fixture(f"v1group_cpuacct.{name}")
                for name in ("usage", "usage_user", "usage_sys", "stat")
            },
            "memory/xfrbench/g/memory.stat": fixture("memory.stat.v1"),
            "memory/xfrbench/g/memory.usage_in_bytes": "1234567\n",
            "memory/xfrbench/g/memory.max_usage_in_bytes": "2345678\n",
        }
    else:
        layout = Layout("v2", str(tmp_path), str(tmp_path), "test")
        files = {
            "xfrbench/g/cpu.stat": fixture("cpu.stat.v2"),
            "xfrbench/g/memory.stat": fixture("synthetic_memory.stat.v2"),
            "xfrbench/g/memory.current": "7654321\n",
        }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return Cgroup("g", layout, cgroup.cgroup_dirs("g", layout))


def test_read_v1_tree(tmp_path: Path) -> None:
    group = _fake_tree(tmp_path, "v1")
    usage = group.read()
    expected = cgroup.adjust_cputime(
        _v1_ns("usage") / 1e9, _v1_ns("usage_user"), _v1_ns("usage_sys"), (0.0, 0.0)
    )
    assert usage == CgroupUsage(
        cpu_user_s=expected[0],
        cpu_system_s=expected[1],
        anon_bytes=990941184,
        charged_bytes=1234567,
        charged_peak_bytes=2345678,
        source="cgroup-v1",
    )
    assert group.procs_files == [
        str(tmp_path / "cpuacct/xfrbench/g/cgroup.procs"),
        str(tmp_path / "memory/xfrbench/g/cgroup.procs"),
    ]


def test_read_v1_tree_without_usage_user_splits_by_cpuacct_stat(tmp_path: Path) -> None:
    # Kernels before 4.7 have cpuacct.usage but no usage_user/usage_sys.
    group = _fake_tree(tmp_path, "v1")
    for name in ("usage_user", "usage_sys"):
        (tmp_path / f"cpuacct/xfrbench/g/cpuacct.{name}").unlink()
    usage = group.read()
    ticks = cgroup.parse_flat_keyed(fixture("v1group_cpuacct.stat"))
    assert usage.cpu_user_s + usage.cpu_system_s == pytest.approx(_v1_ns("usage") / 1e9)
    assert usage.cpu_user_s / usage.cpu_system_s == pytest.approx(ticks["user"] / ticks["system"])


def test_read_v2_tree_with_and_without_memory_peak(tmp_path: Path) -> None:
    group = _fake_tree(tmp_path, "v2")
    usage = group.read()
    assert usage == CgroupUsage(1722.564565, 698.50328, 5341184, 7654321, None, "cgroup-v2")
    (tmp_path / "xfrbench/g/memory.peak").write_text("9999999\n")
    assert group.read().charged_peak_bytes == 9999999
    assert group.procs_files == [str(tmp_path / "xfrbench/g/cgroup.procs")]


def _attach(files: list[str], argv: list[str]) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen(
        cgroup.attach_argv(files, argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=10)
    return proc, out, err


def test_attach_argv_writes_own_pid_then_execs_in_place(tmp_path: Path) -> None:
    # Plain files stand in for cgroup.procs: they record what sh wrote and when.
    files = [str(tmp_path / "a.procs"), str(tmp_path / "b procs")]
    proc, out, err = _attach(files, ["sh", "-c", 'echo "$$ $1|$2"', "x", "--", "two words"])
    assert (proc.returncode, err) == (0, "")
    # The pid Popen saw, the pid sh wrote and the pid of the command after exec are one.
    pid, args = out.strip().split(" ", 1)
    assert int(pid) == proc.pid
    assert args == "--|two words"
    for path in files:
        assert Path(path).read_text() == f"{proc.pid}\n"


def test_attach_argv_without_files_and_with_failure(tmp_path: Path) -> None:
    proc, out, _ = _attach([], ["echo", "plain"])
    assert (proc.returncode, out) == (0, "plain\n")
    missing = str(tmp_path / "no" / "such" / "cgroup.procs")
    proc, out, err = _attach([missing], ["echo", "must not run"])
    assert proc.returncode == 126 and out == ""
    assert f"cannot join cgroup {missing}" in err


def test_remove_deepest_first_and_keeps_a_shared_parent(tmp_path: Path) -> None:
    layout = Layout("v2", str(tmp_path), str(tmp_path), "test")
    mine = cgroup.cgroup_dirs("mine", layout)
    theirs = cgroup.cgroup_dirs("theirs", layout)
    for path in mine + theirs:
        os.makedirs(path, exist_ok=True)
    assert cgroup.remove(mine) == []
    assert not os.path.exists(mine[1])
    assert os.path.isdir(theirs[0]) and os.path.isdir(theirs[1])  # the parent is shared
    assert cgroup.remove(theirs) == []
    assert not os.path.exists(theirs[0])
    assert cgroup.remove(theirs) == []  # already gone is fine


def test_remove_reports_what_it_cannot_remove(tmp_path: Path) -> None:
    group = tmp_path / "xfrbench" / "g"
    (group / "child").mkdir(parents=True)
    assert cgroup.remove([str(group)], wait=0.1) == [f"{group}: still has child groups"]
