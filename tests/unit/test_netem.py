"""tc argv for netem and htb: syntax and parameter meaning (this kernel cannot run netem)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.link import linkem
from harness.link.netem import (
    QUEUE_MAX_PACKETS,
    QUEUE_MIN_PACKETS,
    htb_argv,
    netem_argv,
    parse_tc_stats,
    percent,
    queue_packets,
)
from harness.spec import DirectionSpec, LinkSpec
from harness.testbed import emulation, topology


def direction(**raw: object) -> DirectionSpec:
    return DirectionSpec.model_validate(raw)


def netem_part(commands: list[list[str]]) -> list[str]:
    (command,) = [c for c in commands if "netem" in c]
    return command[command.index("netem") :]


def test_delay_alone_is_root_netem_with_limit() -> None:
    commands = netem_argv(direction(delay="150ms"), "veth-s")
    assert commands == [
        [
            "tc",
            "qdisc",
            "replace",
            "dev",
            "veth-s",
            "root",
            "handle",
            "1:",
            "netem",
            "limit",
            str(queue_packets(None, 0.3, 1500)),
            "delay",
            "150000us",
        ]
    ]


def test_jitter_correlation_and_distribution() -> None:
    args = netem_part(
        netem_argv(
            direction(
                delay="100ms", jitter="10ms", delay_correlation="25%", jitter_distribution="pareto"
            ),
            "d",
        )
    )
    assert args[3:] == ["delay", "100000us", "10000us", "25%", "distribution", "pareto"]


def test_uniform_jitter_names_no_distribution_table() -> None:
    # netem's jitter is uniform by default and there is no 'uniform' table to name.
    args = netem_part(
        netem_argv(direction(delay="10ms", jitter="1ms", jitter_distribution="uniform"), "d")
    )
    assert "distribution" not in args
    assert args[3:] == ["delay", "10000us", "1000us"]


def test_default_distribution_is_normal() -> None:
    args = netem_part(netem_argv(direction(delay="10ms", jitter="2ms"), "d"))
    assert args[-2:] == ["distribution", "normal"]


def test_correlation_without_jitter_is_left_out() -> None:
    args = netem_part(netem_argv(direction(delay="10ms", delay_correlation="25%"), "d"))
    assert args[3:] == ["delay", "10000us"]


def test_random_loss_with_and_without_correlation() -> None:
    assert netem_part(netem_argv(direction(loss="1.5%"), "d"))[3:] == ["loss", "random", "1.5%"]
    args = netem_part(
        netem_argv(direction(loss={"model": "random", "p": "2%", "correlation": "30%"}), "d")
    )
    assert args[3:] == ["loss", "random", "2%", "30%"]


def test_loss_without_delay_adds_no_delay() -> None:
    args = netem_part(netem_argv(direction(loss="10%"), "d"))
    assert "delay" not in args


def test_gemodel_spells_out_every_parameter() -> None:
    # p = good->bad, r = bad->good, then netem's positional 1-h and 1-k (spec fields h, k).
    args = netem_part(
        netem_argv(
            direction(loss={"model": "gemodel", "p": "1%", "r": "20%", "h": "70%", "k": "0.1%"}),
            "d",
        )
    )
    assert args[3:] == ["loss", "gemodel", "1%", "20%", "70%", "0.1%"]


def test_gemodel_defaults() -> None:
    args = netem_part(netem_argv(direction(loss={"model": "gemodel", "p": "2%"}), "d"))
    # r = 100 - p (harness.spec), 1-h = 100 % (all lost in the bad state), 1-k = 0.
    assert args[3:] == ["loss", "gemodel", "2%", "98%", "100%", "0%"]


def test_state_model_defaults_are_tcs() -> None:
    args = netem_part(netem_argv(direction(loss={"model": "state", "p13": "5%"}), "d"))
    assert args[3:] == ["loss", "state", "5%", "95%", "0%", "100%", "0%"]
    args = netem_part(
        netem_argv(
            direction(
                loss={
                    "model": "state",
                    "p13": "5%",
                    "p31": "80%",
                    "p32": "10%",
                    "p23": "50%",
                    "p14": "1%",
                }
            ),
            "d",
        )
    )
    assert args[3:] == ["loss", "state", "5%", "80%", "10%", "50%", "1%"]


def test_duplicate_reorder_and_gap() -> None:
    args = netem_part(
        netem_argv(direction(delay="10ms", duplicate="1%", reorder="25%", reorder_gap=5), "d")
    )
    assert args[3:] == ["delay", "10000us", "duplicate", "1%", "reorder", "25%", "gap", "5"]


def test_reorder_without_gap() -> None:
    args = netem_part(netem_argv(direction(delay="10ms", reorder="10%"), "d"))
    assert args[-2:] == ["reorder", "10%"]
    assert "gap" not in args


def test_rate_puts_netem_under_htb() -> None:
    commands = netem_argv(direction(delay="20ms", rate="100mbit"), "veth-s")
    assert commands[0] == [
        "tc",
        "qdisc",
        "replace",
        "dev",
        "veth-s",
        "root",
        "handle",
        "1:",
        "htb",
        "default",
        "1",
    ]
    assert commands[1][:8] == ["tc", "class", "add", "dev", "veth-s", "parent", "1:", "classid"]
    assert commands[1][commands[1].index("rate") + 1] == "100000000bit"
    assert commands[1][commands[1].index("ceil") + 1] == "100000000bit"
    assert commands[2][:10] == [
        "tc",
        "qdisc",
        "add",
        "dev",
        "veth-s",
        "parent",
        "1:1",
        "handle",
        "10:",
        "netem",
    ]
    # Limit from the rate: 2 * 100 Mbit/s * 40 ms / 1514 B, above the floor.
    assert commands[2][11] == str(max(QUEUE_MIN_PACKETS, queue_packets(100_000_000, 0.04, 1500)))


def test_rate_only_is_htb_with_a_fifo() -> None:
    commands = netem_argv(direction(rate="10mbit"), "d")
    assert [c[:3] for c in commands] == [
        ["tc", "qdisc", "replace"],
        ["tc", "class", "add"],
        ["tc", "qdisc", "add"],
    ]
    assert "netem" not in commands[2] and "pfifo" in commands[2]


def test_unimpaired_direction_has_no_commands() -> None:
    assert netem_argv(direction(), "d") == []


def test_explicit_limit_and_seed() -> None:
    args = netem_part(netem_argv(direction(delay="1ms"), "d", limit=5000, seed=42))
    assert args[:3] == ["netem", "limit", "5000"]
    assert args[-2:] == ["seed", "42"]


def test_limit_is_two_bdp_of_the_rtt() -> None:
    # 10 Gbit/s ceiling, 300 ms RTT: far above the cap; 1 Gbit/s, 100 ms RTT: 2 BDP exactly.
    assert queue_packets(None, 0.3, 1500) == QUEUE_MAX_PACKETS
    assert queue_packets(1_000_000_000, 0.1, 1500) == 16_513  # ceil(2 * 1e9 * .1 / 8 / 1514)
    assert queue_packets(1_000_000, 0.001, 1500) == QUEUE_MIN_PACKETS
    args = netem_part(netem_argv(direction(delay="50ms", rate="1gbit"), "d", rtt=0.1))
    assert args[2] == "16513"


def test_htb_burst_covers_a_millisecond() -> None:
    (_, cls) = htb_argv("d", 1_000_000_000)
    assert cls[cls.index("burst") + 1] == "125000"
    (_, cls) = htb_argv("d", 1_000_000)
    assert cls[cls.index("burst") + 1] == str(4 * 1514)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1, "1%"),
        (0.5, "0.5%"),
        (0.00001, "0.00001%"),
        (100, "100%"),
        (0, "0%"),
        (12.345678, "12.345678%"),
    ],
)
def test_percent_never_uses_exponents(value: float, text: str) -> None:
    assert percent(value) == text


def test_linkem_config_matches_netem_meaning_in_fractions() -> None:
    link = LinkSpec.model_validate(
        {
            "forward": {
                "delay": "150ms",
                "jitter": "5ms",
                "loss": {"model": "gemodel", "p": "1%"},
                "duplicate": "0.5%",
            },
            "reverse": {},
            "seed": 42,
        }
    )
    hosts = topology.two_hosts(link)
    plan = topology.plan_topology("0a1b2c", "198.18.0.0/15", "198.18.7.0/24", hosts)
    found = emulation.directions(plan, hosts)
    config = linkem.config(
        [(d.name, d.spec, q) for d, q in emulation.queue_numbers(found, every_direction=False)],
        rtt=emulation.link_rtt(hosts),
        seed=link.seed,
        stats_path=Path("/x/stats.json"),
    )
    assert config["seed"] == 42 and config["stats_path"] == "/x/stats.json"
    (forward,) = config["directions"]  # the unimpaired reverse direction gets no queue
    assert forward["name"] == "forward" and forward["queue"] == 10
    assert forward["delay_us"] == 150_000 and forward["jitter_us"] == 5_000
    assert forward["loss"] == {
        "model": "gemodel",
        "p": 0.01,
        "r": 0.99,
        "one_minus_h": 1.0,
        "one_minus_k": 0.0,
    }
    assert forward["duplicate"] == 0.005
    assert forward["queue_max_len"] == QUEUE_MAX_PACKETS  # 10 Gbit/s ceiling over 310 ms


def test_linkem_random_and_state_loss() -> None:
    assert linkem.loss_config(direction(loss="10%").loss) == {
        "model": "random",
        "p": 0.1,
        "correlation": 0.0,
    }
    assert linkem.loss_config(direction().loss) == {"model": "none"}
    assert linkem.loss_config(direction(loss={"model": "state", "p13": "5%"}).loss) == {
        "model": "state",
        "p13": 0.05,
        "p31": 0.95,
        "p32": 0.0,
        "p23": 1.0,
        "p14": 0.0,
    }


def test_parse_tc_stats() -> None:
    text = (
        "class htb 1:1 root leaf 10: prio 0 rate 50Mbit ceil 50Mbit burst 6250b cburst 6250b \n"
        " Sent 140 bytes 2 pkt (dropped 1, overlimits 3 requeues 0) \n"
        " backlog 0b 0p requeues 0\n"
        " lended: 2 borrowed: 0 giants: 0\n\n"
        "qdisc netem 10: parent 1:1 limit 1000 delay 10ms\n"
        " Sent 9000 bytes 6 pkt (dropped 2, overlimits 0 requeues 0)\n"
        " backlog 1514b 1p requeues 0\n"
    )
    htb, netem = parse_tc_stats(text)
    assert htb == {
        "type": "class",
        "kind": "htb",
        "handle": "1:1",
        "parent": "root",
        "bytes": 140,
        "packets": 2,
        "drops": 1,
        "overlimits": 3,
        "requeues": 0,
        "backlog_bytes": 0,
        "backlog_packets": 0,
    }
    assert netem["kind"] == "netem" and netem["drops"] == 2 and netem["backlog_packets"] == 1
    assert netem["parent"] == "1:1"


# --- `xfrbench link test` flags become a LinkSpec/HostsSpec, with errors naming the flag ---

from harness.core.errors import UserInputError  # noqa: E402
from harness.linktest.check import build_specs  # noqa: E402


def test_flags_build_the_same_specs_a_scenario_would() -> None:
    link, hosts = build_specs(
        delay="150ms",
        reverse_delay="20ms",
        loss="1%",
        reverse_loss="0%",
        rate="100mbit",
        mtu="1400",
        cc="cubic",
        sysctls=["secondary:net.ipv4.tcp_rmem=4096 131072 8388608"],
    )
    assert link.forward.delay == 0.15 and link.reverse.delay == 0.02
    assert link.forward.loss.p == 1 and not link.reverse.loss.active
    assert link.forward.rate == link.reverse.rate == 100_000_000
    assert link.forward.mtu == 1400
    assert hosts.primary.sysctls() == {"net.ipv4.tcp_congestion_control": "cubic"}
    assert hosts.secondary.sysctls()["net.ipv4.tcp_rmem"] == "4096 131072 8388608"


@pytest.mark.parametrize(
    ("kwargs", "flag", "text"),
    [
        ({"delay": "5parsecs"}, "--delay", "unknown duration unit"),
        ({"reverse_delay": "-1ms"}, "--reverse-delay", "negative"),
        ({"loss": "120%"}, "--loss", "out of range"),
        ({"reverse_loss": "lots"}, "--reverse-loss", "cannot parse"),
        ({"rate": "10mbps"}, "--rate", "ambiguous"),
        ({"mtu": "100"}, "--mtu", "576"),
        ({"jitter": "5ms"}, "--jitter", "needs a delay"),
        ({"backend": "tc"}, "--backend", "not allowed"),
        ({"cc": "vegas2"}, "--cc", "not allowed"),
        ({"sysctls": ["primary:net.core.rmem_max=1"]}, "--sysctl", "cannot be set per host"),
        ({"sysctls": ["router:net.ipv4.tcp_sack=0"]}, "--sysctl", "not a host"),
        ({"sysctls": ["primary-net.ipv4.tcp_sack"]}, "--sysctl", "HOST:KEY=VALUE"),
    ],
)
def test_bad_flags_name_the_flag(kwargs: dict[str, object], flag: str, text: str) -> None:
    with pytest.raises(UserInputError, match=text) as info:
        build_specs(**kwargs)  # type: ignore[arg-type]
    assert info.value.key == flag
    assert info.value.exit_status == 2
