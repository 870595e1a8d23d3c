"""linkem's control spread over an inventory's hosts (remote/linkctl.py): which host takes
a command, one linkem's stats from each host's, and linkem's times on this machine's
clock; written as linkem answers (linkem/README.md, "Runtime control")."""

from __future__ import annotations

import pytest

from harness.link.linkem import LinkemControlError, checked, reset_command
from harness.remote.linkctl import merged, on_wall, owner


def test_a_command_goes_to_the_host_whose_direction_it_names() -> None:
    hosts = {"ns1", "ns3", "ns3-b"}
    assert owner("ns3 forward", hosts) == "ns3"
    assert owner("ns3-b reverse", hosts) == "ns3-b"
    with pytest.raises(LinkemControlError, match="'ns2 forward'.*ns1, ns3, ns3-b"):
        owner("ns2 forward", hosts)


def test_linkems_times_are_put_on_this_machines_clock() -> None:
    """A host 2.5 s ahead: its answer's and its events' unix times, 2.5 s back."""

    def to_wall(at: float) -> float:
        return at - 2.5

    answer = {"ok": True, "at_unix": 1000.0, "direction": "ns1 forward", "armed": False,
              "state": {"down": True}}  # fmt: skip
    assert on_wall(answer, to_wall) == answer | {"at_unix": 997.5}
    stats = {
        "updated_at_unix": 1010.0,
        "directions": {"ns1 forward": {"passed_bytes": 5}},
        "events": [{"at_unix": 1001.0, "direction": "ns1 forward", "event": "fired",
                    "detail": {"action": "set"}}],
    }  # fmt: skip
    moved = on_wall(stats, to_wall)
    assert moved["updated_at_unix"] == 1007.5
    assert moved["events"] == [stats["events"][0] | {"at_unix": 998.5}]
    assert moved["directions"] == stats["directions"]


def test_the_hosts_stats_read_as_one_linkems() -> None:
    ns1 = {
        "updated_at_unix": 20.0,
        "events_dropped": 1,
        "directions": {"ns1 forward": {"passed_bytes": 5}, "ns1 reverse": {}},
        "events": [{"at_unix": 12.0, "event": "reset", "direction": "ns1 forward"}],
    }
    ns3 = {"updated_at_unix": 19.5, "events_dropped": 0,
           "directions": {"ns3 forward": {"passed_bytes": 7}},
           "events": [{"at_unix": 11.0, "event": "armed", "direction": "ns3 forward"}]}  # fmt: skip
    both = merged({"ns1": ns1, "ns3": ns3})
    assert set(both["directions"]) == {"ns1 forward", "ns1 reverse", "ns3 forward"}
    assert [e["direction"] for e in both["events"]] == ["ns3 forward", "ns1 forward"]
    assert both["events_dropped"] == 1
    assert both["updated_at_unix"] == 19.5  # as fresh as the oldest
    assert merged({}) == {"directions": {}, "events": [], "events_dropped": 0}


def test_a_refusal_is_raised_with_linkems_reason() -> None:
    command = reset_command("ns1 forward")
    answer = {"ok": True, "at_unix": 1.0}
    assert checked(command, answer) is answer
    with pytest.raises(LinkemControlError, match="nothing to reset"):
        checked(command, {"ok": False, "error": "the connection has closed: nothing to reset"})
