"""[[faults]] in a scenario: cases, what each kind takes, and the errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import spec
from harness.core.errors import ScenarioError
from harness.spec.faults import describe_fault, fault_targets

FLEET = """
trigger = "notify"
transports = ["tcp"]
xfr = ["axfr", "ixfr"]
[[secondaries]]
name = "near"
kind = "bind"
[[secondaries]]
name = "far"
kind = "nsd"
count = 2
"""


def load(tmp_path: Path, text: str) -> spec.LoadedScenario:
    path = tmp_path / "f.toml"
    path.write_text(text)
    return spec.load(path)


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ScenarioError) as caught:
        load(tmp_path, text)
    return str(caught.value)


def test_each_fault_is_a_case_beside_transport_and_kind(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        FLEET
        + """
[[faults]]
kind = "link-down"
at = "1s"
duration = "30s"
target = "far"
direction = "forward"
[[faults]]
name = "cut-early"
kind = "reset"
after_bytes = "1MB"
[[faults]]
kind = "primary-restart"
""",
    )
    names = [case.name for case in loaded.cases]
    assert names == [
        "bind-bind+nsd/tcp/axfr/link-down",
        "bind-bind+nsd/tcp/axfr/cut-early",
        "bind-bind+nsd/tcp/axfr/primary-restart",
        "bind-bind+nsd/tcp/ixfr/link-down",
        "bind-bind+nsd/tcp/ixfr/cut-early",
        "bind-bind+nsd/tcp/ixfr/primary-restart",
    ]
    down, cut, restart = (case.fault for case in loaded.cases[:3])
    assert down is not None and cut is not None and restart is not None
    assert (down.start_at, down.duration, down.directions) == (1.0, 30.0, ("forward",))
    assert cut.after_bytes == 1_000_000 and cut.start_at == 0.0 and cut.on_link
    assert restart.on_primary and restart.duration is None
    sites = loaded.scenario.sites
    assert fault_targets(down, sites) == ["far-1", "far-2"]
    assert fault_targets(cut, sites) == ["near", "far-1", "far-2"]
    assert describe_fault(down) == "link-down forward for 30 s at 1 s on far"


def test_a_scenario_without_faults_keeps_its_cases_and_hash(tmp_path: Path) -> None:
    plain = load(tmp_path, FLEET)
    assert [c.name for c in plain.cases] == ["bind-bind+nsd/tcp/axfr", "bind-bind+nsd/tcp/ixfr"]
    assert all(c.fault is None for c in plain.cases)
    faulted = load(tmp_path, FLEET + '[[faults]]\nkind = "primary-restart"\n')
    assert faulted.spec_hash != plain.spec_hash
    again = load(tmp_path, "faults = []\n" + FLEET)
    assert again.spec_hash == plain.spec_hash


def test_a_host_may_be_a_target(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        FLEET + '[[faults]]\nkind = "secondary-kill"\nduration = "5s"\ntarget = "far-2"\n',
    )
    fault = loaded.cases[0].fault
    assert fault is not None and fault_targets(fault, loaded.scenario.sites) == ["far-2"]


def test_degrade_and_slow_primary_take_their_own_keys(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        FLEET
        + """
[[faults]]
kind = "link-degrade"
duration = "60s"
delay = "150ms"
loss = "10%"
target = "far"
[[faults]]
kind = "slow-primary"
duration = "20s"
rate = "1mbit"
""",
    )
    degrade, slow = loaded.cases[0].fault, loaded.cases[1].fault
    assert degrade is not None and degrade.loss is not None
    assert (degrade.delay, degrade.loss.p, degrade.directions) == (
        0.15,
        10.0,
        ("forward", "reverse"),
    )
    assert slow is not None and slow.rate == 1_000_000 and slow.directions == ("forward",)


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ('kind = "reset"', "faults[0]: a reset needs its moment"),
        ('kind = "reset"\nat = "1s"\nduration = "2s"', "is one event and has no duration"),
        ('kind = "link-down"\nat = "1s"', "faults[0]: a link-down fault needs a duration"),
        ('kind = "primary-stop"\nduration = "1s"\ntarget = "far"', "target does not apply"),
        ('kind = "slow-primary"\nduration = "1s"', "needs the rate it drops to"),
        ('kind = "link-degrade"\nduration = "1s"', "needs a delay, a loss or both"),
        ('kind = "link-down"\nduration = "1s"\nat = "1s"\nafter_bytes = 5', "not both"),
        ('kind = "explode"', "faults[0].kind: 'explode' is not allowed"),
        ('kind = "link-down"\nduration = "1s"\ntarget = "tokyo"', "faults[0].target: 'tokyo'"),
        ('kind = "reset"\nat = "1s"\nrate = "1mbit"', "rate does not apply to a reset fault"),
        ('kind = "reset"\nat = "1s"\nname = "Big Reset"', "name 'Big Reset' must be"),
        ('kind = "secondary-kill"\nduration = "1s"\nwhen = "now"', "faults[0].when: unknown key"),
    ],
)
def test_bad_faults_name_the_key_and_the_fix(tmp_path: Path, fault: str, words: str) -> None:
    assert words in error(tmp_path, FLEET + "[[faults]]\n" + fault + "\n")


def test_two_faults_of_one_name(tmp_path: Path) -> None:
    text = FLEET + '[[faults]]\nkind = "primary-restart"\n' * 2
    assert "faults[1]: a fault named 'primary-restart' is faults[0] already" in error(
        tmp_path, text
    )


def test_link_faults_need_linkem_and_faults_a_new_serial(tmp_path: Path) -> None:
    netem = '[link]\nbackend = "netem"\ndelay = "5ms"\n[[faults]]\nkind = "reset"\nat = "1s"\n'
    assert "needs linkem's runtime control" in error(tmp_path, netem)
    cold = 'trigger = "cold-start"\n[[faults]]\nkind = "primary-restart"\n'
    assert "not a cold start" in error(tmp_path, cold)


def test_a_matrix_case_that_loses_the_target_site_is_named(tmp_path: Path) -> None:
    text = (
        FLEET
        + '[[faults]]\nkind = "secondary-kill"\nduration = "1s"\ntarget = "far-2"\n'
        + '[matrix]\n"secondaries.far.count" = [2, 1]\n'
    )
    message = error(tmp_path, text)
    assert "faults[0].target: 'far-2' names no site or host" in message
    assert "(in the matrix case secondaries.far.count=1)" in message


def test_the_shipped_faults_scenario() -> None:
    loaded = spec.load(Path(__file__).resolve().parents[2] / "scenarios" / "faults.toml")
    kinds = {case.fault.kind for case in loaded.cases if case.fault is not None}
    assert kinds == {
        "link-down",
        "reset",
        "slow-primary",
        "link-degrade",
        "primary-restart",
        "primary-stop",
        "secondary-kill",
    }
    assert len(loaded.cases) == 7 * 2 * 2  # every fault, AXFR and IXFR, TCP and XoT
    nsd262 = next(c for c in loaded.cases if c.name.endswith("xot/ixfr/nsd262"))
    assert nsd262.fault is not None and nsd262.fault.target == "nsd"
    assert nsd262.fault.delay == 0.15 and nsd262.fault.loss is not None
    assert nsd262.fault.loss.p == 10.0
    assert loaded.scenario.zones.record_count == 1_000_000
