"""Testbed registry and topology plan: serialisation and cleanup planning (no root)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.spec import LinkSpec
from harness.testbed import registry as reg
from harness.testbed import topology as planning

TWO = planning.two_hosts(LinkSpec())


def test_plan_names_and_addresses() -> None:
    plan = planning.plan_topology("0a1b2c", "198.18.0.0/15", "198.18.7.0/24", TWO)
    assert plan.namespaces == {
        "primary": "xfb-0a1b2c-p",
        "router": "xfb-0a1b2c-r",
        "secondary": "xfb-0a1b2c-s",
    }
    primary, secondary = plan.segments["primary"], plan.segments["secondary"]
    assert (primary.subnet, primary.router_address, primary.host_address) == (
        "198.18.7.0/25",
        "198.18.7.1",
        "198.18.7.2",
    )
    assert (secondary.subnet, secondary.router_address, secondary.host_address) == (
        "198.18.7.128/25",
        "198.18.7.129",
        "198.18.7.130",
    )
    assert primary.router_if == "veth-p" and secondary.router_if == "veth-s"
    assert plan.address("router") == "198.18.7.1"
    assert all(planning.NETNS_RE.match(name) for name in plan.namespaces.values())
    assert not planning.NETNS_RE.match("xfb-0a1b2c-x")
    assert not planning.NETNS_RE.match("xfbx0a1b2c-p")


def test_slices() -> None:
    assert planning.slice_count("198.18.0.0/15") == 512
    assert planning.slice_at("198.18.0.0/15", 511) == "198.19.255.0/24"
    assert planning.slice_count("10.9.8.0/28") == 1
    assert planning.slice_at("10.9.8.0/28", 0) == "10.9.8.0/28"
    small = planning.plan_topology("000001", "10.9.8.0/29", "10.9.8.0/29", TWO)
    assert small.segments["primary"].subnet == "10.9.8.0/30"
    assert small.segments["secondary"].host_address == "10.9.8.6"
    with pytest.raises(ValueError, match="too small"):
        planning.parse_block("10.9.8.0/30")
    with pytest.raises(ValueError, match="not an IPv4 network"):
        planning.parse_block("10.9.8.1/24")


def test_choose_slice_starts_at_the_id_and_skips_used() -> None:
    block = "198.18.0.0/15"
    first = planning.choose_slice(block, "000005", set())
    assert first == "198.18.5.0/24"
    assert planning.choose_slice(block, "000005", {"198.18.5.0/24"}) == "198.18.6.0/24"
    assert planning.choose_slice(block, "0001ff", {"198.19.255.0/24"}) == "198.18.0.0/24"
    with pytest.raises(LookupError, match="held by other testbeds"):
        planning.choose_slice("10.0.0.0/24", "000000", {"10.0.0.0/24"})


def test_registry_round_trip(tmp_path: Path) -> None:
    registry = reg.Registry.create(tmp_path, "abcdef", label="x", slice="198.18.1.0/24")
    assert registry.path == tmp_path / "abcdef.json"
    assert oct(registry.path.stat().st_mode & 0o777) == "0o600"
    registry.add("netns", name="xfb-abcdef-p")
    item = registry.add("process", pid=123, start=456, netns="xfb-abcdef-r", argv=["linkem"])
    loaded = reg.Registry.load(registry.path)
    assert loaded.testbed_id == "abcdef"
    assert loaded.data["driver"]["pid"] == os.getpid()
    assert [i["kind"] for i in loaded.items] == ["netns", "process"]
    assert loaded.driver_alive()  # this very process
    registry.discard(item)
    assert [i["kind"] for i in reg.Registry.load(registry.path).items] == ["netns"]
    with pytest.raises(FileExistsError):
        reg.Registry.create(tmp_path, "abcdef")
    assert not list(tmp_path.glob("*.tmp"))
    registry.delete()
    assert not registry.path.exists()


def test_load_all_reports_unreadable_files(tmp_path: Path) -> None:
    reg.Registry.create(tmp_path, "000001")
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"format": 99}))
    registries, problems = reg.load_all(tmp_path)
    assert [r.testbed_id for r in registries] == ["000001"]
    assert len(problems) == 2 and all("left alone" in p for p in problems)


def test_dead_driver_detected(tmp_path: Path) -> None:
    registry = reg.Registry.create(tmp_path, "000002")
    registry.data["driver"] = {"pid": os.getpid(), "start": 1}  # same pid, other start time
    assert not registry.driver_alive()
    registry.data["driver"] = {"pid": 2**22 + 1, "start": 5}
    assert not registry.driver_alive()


ITEMS = [
    {"kind": "netns", "name": "xfb-abcdef-p"},
    {"kind": "netns", "name": "xfb-abcdef-r"},
    {"kind": "cc_allowed", "key": reg.CC_ALLOWED, "old": "reno bbr", "added": ["cubic"]},
    {
        "kind": "iptables",
        "netns": "xfb-abcdef-r",
        "table": "filter",
        "chain": "FORWARD",
        "rule": ["-i", "veth-p", "-j", "NFQUEUE", "--queue-num", "10"],
    },
    {"kind": "file", "path": "/tmp/x/linkem.json", "keep": True},
    {"kind": "file", "path": "/tmp/x/scratch"},
    {"kind": "process", "pid": 100, "start": 5000, "argv": ["linkem", "--config", "c"]},
    {"kind": "process", "pid": 101, "start": 5001, "argv": ["iperf3"]},
    {"kind": "process", "pid": 102, "start": 5002, "argv": ["gone"]},
    {"kind": "sysctl", "key": "net.core.rmem_max", "old": "212992", "new": "67108864"},
]


def test_cleanup_plan_is_reverse_order_and_respects_start_times() -> None:
    table = {100: 5000, 101: 9999}  # 101 was recycled; 102 has exited
    actions, notes = reg.plan_cleanup(ITEMS, table.get)
    assert [(a.kind, a.target) for a in actions] == [
        ("sysctl", "net.core.rmem_max"),
        ("kill", "100"),
        ("file", "/tmp/x/scratch"),
        ("iptables", "-i veth-p -j NFQUEUE --queue-num 10"),
        ("cc_allowed", "cubic"),
        ("netns", "xfb-abcdef-r"),
        ("netns", "xfb-abcdef-p"),
    ]
    assert notes == ["pid 101 is a different process now (recycled); left alone"]
    assert actions[1].detail == {"pid": 100, "start": 5000, "argv": ["linkem", "--config", "c"]}
    assert actions[1].item is ITEMS[6]


def test_cleanup_plan_keeps_cc_another_live_testbed_needs() -> None:
    actions, notes = reg.plan_cleanup(ITEMS[2:3], lambda pid: None, still_needed_cc={"cubic"})
    assert actions == []
    assert "another live testbed" in notes[0]


def test_cleanup_plan_never_kills_without_a_start_time() -> None:
    actions, _ = reg.plan_cleanup([{"kind": "process", "pid": 1, "start": None}], lambda p: 77)
    assert actions == []


def test_cc_name_helpers() -> None:
    assert reg.add_names("reno bbr", ["cubic"]) == "reno bbr cubic"
    assert reg.add_names("reno bbr cubic", ["cubic"]) == "reno bbr cubic"
    assert reg.remove_names("reno bbr cubic", ["cubic"], keep=set()) == "reno bbr"
    assert reg.remove_names("reno cubic bbr", ["cubic"], keep={"cubic"}) == "reno cubic bbr"
    assert reg.normalize_sysctl("4096\t131072\t6291456\n") == "4096 131072 6291456"


def test_cc_needed_by_others(tmp_path: Path) -> None:
    mine = reg.Registry.create(tmp_path, "000010")
    other = reg.Registry.create(tmp_path, "000011")  # live: its driver is this process
    other.add("cc_allowed", key=reg.CC_ALLOWED, old="reno", added=["cubic"])
    dead = reg.Registry.create(tmp_path, "000012")
    dead.add("cc_allowed", key=reg.CC_ALLOWED, old="reno", added=["htcp"])
    dead.data["driver"]["start"] = -1
    assert reg.cc_needed_by_others([mine, other, dead], "000010") == {"cubic"}


def test_execute_removes_files_and_reports(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.write_text("x")
    done, notes, failed = reg.execute(
        [reg.Action("file", str(scratch)), reg.Action("file", str(tmp_path / "missing"))]
    )
    assert done == [f"file {scratch}"] and notes == [] and failed == []
    assert not scratch.exists()


def test_proc_start_time_of_self_and_of_nobody() -> None:
    assert reg.proc_start_time(os.getpid()) is not None
    assert reg.proc_start_time(2**22 + 7) is None


def test_cleanup_plan_leaves_a_shared_folder_another_live_testbed_relies_on() -> None:
    shared = [{"kind": "shared_dir", "path": "/run/sshd"}]
    actions, notes = reg.plan_cleanup(shared, lambda pid: None, still_needed_dirs={"/run/sshd"})
    assert actions == []
    assert notes == ["folder /run/sshd stays: another live testbed relies on it"]
    actions, notes = reg.plan_cleanup(shared, lambda pid: None, still_needed_dirs=set())
    assert [(a.kind, a.target) for a in actions] == [("shared_dir", "/run/sshd")] and not notes


def test_shared_dirs_of_others_are_those_of_live_testbeds(tmp_path: Path) -> None:
    mine = reg.Registry.create(tmp_path, "000020")
    mine.add("shared_dir", path="/run/sshd")
    other = reg.Registry.create(tmp_path, "000021")
    other.add("shared_dir", path="/run/sshd")
    dead = reg.Registry.create(tmp_path, "000022")
    dead.add("shared_dir", path="/run/other")
    dead.data["driver"]["start"] = -1
    assert reg.shared_dirs_of_others([mine, other, dead], "000020") == {"/run/sshd"}
    assert reg.shared_dirs_of_others([mine, dead], "000020") == set()
