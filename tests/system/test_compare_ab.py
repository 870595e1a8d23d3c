"""The upgrade gate on real servers: one interleaved A/B run of BIND with its default
transfer-format (many-answers) against `transfer-format one-answer` on the primary (one
record per message: a real configuration regression, the primary and the secondary work
through 10,000 messages instead of a few dozen), and an A/A run of the same servers under
two labels. `compare RUN --axis servers.primary.options` must call the first a regression
of the durations and of the CPU, and the second no regression at the stated power (exit 0).

Four transports of one 10k-record AXFR, 20 repeats a side: every figure over all four
cases must be decidable, and four cases are not quick.toml's sixteen (the README's 10
repeats are for those). Measured here (2-core VM shared with other work): at 10 repeats
the A/A run's CPU over the four cases resolved 10.5 %, short of the 10 % threshold (exit 4,
"needs n >= 12"); at 16, 9.3 % and 9.4 % (exit 0, +3.0 % and +2.6 %; durations +1.1 %, MDE
2.8 %), too close to the threshold for a test that must not flake. One-answer at 16
repeats: durations +45.9 %, primary CPU +554 %, secondary CPU +206 % over the four cases
(exit 1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness import spec
from harness.cli import main
from harness.run.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

AXIS = "servers.primary.options"
SCENARIO = """\
description = "A/B: BIND's transfer-format, default against {b}, on the primary"
repeats = 20
timeout = "60s"
transports = ["tcp", "tcp-tsig", "xot", "xot-tsig"]
xfr = ["axfr"]
trigger = "notify"

[zones]
preset = "tld"
records = 10000
origin = "ab.example."
seed = 1

[servers.primary]
kind = "bind"

[servers.secondary]
kind = "bind"

[link]
delay = "10ms"

[matrix]
"servers.primary.options" = [{{ label = "default" }}, {side_b}]
"""
ONE_ANSWER = '{ label = "one-answer", transfer-format = "one-answer" }'
SAME = '{ label = "same" }'  # the default again, under another name: an A/A run


def compare(tmp_path: Path, name: str, side_b: str, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / f"{name}.toml"
    path.write_text(SCENARIO.format(b=name, side_b=side_b))
    loaded = spec.load(path)
    assert len(loaded.cases) == 8
    run = run_scenario(loaded, results_root=tmp_path, run_id=name)
    capsys.readouterr()
    status = main(["compare", str(run), "--axis", AXIS])
    out = capsys.readouterr().out
    with capsys.disabled():
        print(out)  # the tables, for the test log (pytest -s)
    assert main(["compare", str(run), "--axis", AXIS, "--json"]) == status
    return status, json.loads(capsys.readouterr().out)


def test_one_answer_is_a_regression_of_duration_and_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, data = compare(tmp_path, "one-answer", ONE_ANSWER, capsys)
    assert status == 1
    overall = {c["figure"]: c for c in data["cases"] if c["overall"]}
    assert overall["duration"]["verdict"] == "regression"
    assert overall["CPU per transfer, primary"]["verdict"] == "regression"
    assert data["axis"] == f"{AXIS}: default -> one-answer"


def test_the_same_servers_on_both_sides_are_no_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, data = compare(tmp_path, "same", SAME, capsys)
    assert status == 0, data["cannot_tell"] + data["regressions"]
