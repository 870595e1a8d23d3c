"""A transport is one value from the scenario to the wire (harness/core/transport.py): made
once from the scenario's name and TSIG algorithm, carried through the plan, the servers'
setups and their switches, the agents' JSON and the client's pull, kept by name in the
record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import spec
from harness.core.errors import ScenarioError
from harness.core.terms import TRANSPORTS
from harness.core.transport import TCP, Transport
from harness.measure.client_pull import pull_zone
from harness.plan.case import GroupPlan, plan_case
from harness.xfr import TsigKey
from tests.unit.test_flows import FakeBench, _run

EVERY = [  # name, over TLS, its TSIG algorithm (the scenario's: sha512), port
    ("tcp", False, None, 53),
    ("tcp-tsig", False, "hmac-sha512", 53),
    ("xot", True, None, 853),
    ("xot-tsig", True, "hmac-sha512", 853),
]


def test_every_transport_by_name_tls_tsig_and_port() -> None:
    made = [Transport.parse(name, "hmac-sha512") for name in TRANSPORTS]
    assert [(t.name, t.tls, t.tsig_algorithm, t.port) for t in made] == EVERY
    assert [t.signed for t in made] == [False, True, False, True]
    assert [str(t) for t in made] == list(TRANSPORTS)  # messages name it as the user wrote it
    assert Transport.parse("tcp") == TCP
    assert Transport.parse("tcp-tsig").tsig_algorithm == "hmac-sha256"  # the scenario default


def test_the_evidence_of_the_wire_names_a_transport() -> None:
    seen = [(t.tls, t.signed) for t in map(Transport.parse, TRANSPORTS)]
    assert [Transport.seen(tls, signed).name for tls, signed in seen] == list(TRANSPORTS)


def test_a_name_that_is_no_transport_names_the_key_and_the_choices() -> None:
    with pytest.raises(ValueError, match="transports: 'dot' is not a transport; write one of"):
        Transport.parse("dot")


def test_its_parts_always_agree_with_its_name() -> None:
    with pytest.raises(ValueError, match="does not match its parts"):
        Transport("xot", False, None, 853)
    with pytest.raises(ValueError, match="does not match its parts"):
        Transport("tcp", False, "hmac-sha256", 53)  # unsigned with an algorithm


@pytest.mark.parametrize("name", TRANSPORTS)
def test_the_agents_json_round_trip(name: str) -> None:
    transport = Transport.parse(name, "hmac-sha384")
    assert Transport.from_dict(json.loads(json.dumps(transport.to_dict()))) == transport


def test_the_agents_json_refuses_parts_that_disagree() -> None:
    forged = Transport.parse("xot").to_dict() | {"port": 53}
    with pytest.raises(ValueError, match="do not match its name"):
        Transport.from_dict(forged)


def test_what_a_switch_changes() -> None:
    tcp, tcp_tsig, xot, xot_tsig = (Transport.parse(n) for n in TRANSPORTS)
    assert tcp.switch_to(Transport.parse("tcp")) is None
    assert tcp.switch_to(tcp_tsig) == ("tcp", "tcp-tsig")
    assert xot_tsig.switch_to(tcp) == ("xot-tsig", "tcp")
    assert xot.switch_to(xot_tsig) == ("xot", "xot-tsig")
    # Another algorithm is another key in the secondary's config: a switch, by name alike.
    other = Transport.parse("tcp-tsig", "hmac-sha512")
    assert tcp_tsig.switch_to(other) == ("tcp-tsig", "tcp-tsig")


def test_the_secrets_a_transport_uses() -> None:
    picked = [Transport.parse(n).secrets("key", "files") for n in TRANSPORTS]
    assert picked == [(None, None), ("key", None), (None, "files"), ("key", "files")]


def test_a_pull_over_tls_without_the_ca_is_refused_before_it_starts() -> None:
    with pytest.raises(ValueError, match="a pull over xot needs the primary's TLS CA"):
        pull_zone("own", "q.", "127.0.0.1", None, Transport.parse("xot"), tls_ca=None,
                  tsig=TsigKey("k.", "hmac-sha256", "c2VjcmV0"), timeout=1.0)  # fmt: skip


def test_a_scenario_makes_each_case_transport_once(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('transports = ["tcp", "xot-tsig"]\ntsig_algorithm = "hmac-sha512"\n')
    cases = spec.load(path).cases
    assert [c.transport for c in cases] == [
        Transport.parse("tcp"),
        Transport.parse("xot-tsig", "hmac-sha512"),
    ]
    assert [c.name.split("/")[-2] for c in cases] == ["tcp", "xot-tsig"]
    group = GroupPlan(tuple(plan_case(c) for c in cases))
    assert group.tls and group.tsig_algorithm == "hmac-sha512" and not group.signed_only


def test_a_name_no_transport_is_refused_by_the_scenario(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('transports = ["tcp", "xot-sig"]\n')
    with pytest.raises(ScenarioError, match=r"transports\[1\]: 'xot-sig' is not allowed; allowed"):
        spec.load(path)


def test_the_record_keeps_the_name(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('repeats = 1\ntransports = ["xot-tsig"]\n')
    (record,) = _run(FakeBench(plan_case(spec.load(path).cases[0])))
    assert record.transport == "xot-tsig" and record.to_dict()["transport"] == "xot-tsig"
