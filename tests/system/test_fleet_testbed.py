"""One primary and three secondaries in network namespaces, a zone transferred to each."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from harness import spec
from harness.plan.case import plan_case
from harness.results.folder import read_run
from harness.results.store import RunStore
from harness.run.runner import NETNS, resolve_binaries, run_case

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]


def test_one_primary_feeds_three_secondaries_of_each_kind(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(
        'repeats = 2\ntimeout = "30s"\ntransports = ["tcp-tsig"]\ntrigger = "notify"\n'
        '[zones]\npreset = "tld"\nrecords = 500\norigin = "fleet.example."\n'
        '[link]\ndelay = "5ms"\n'
    )
    loaded = spec.load(path)
    plan = plan_case(loaded.cases[0])
    first = plan.secondaries[0]
    hosts = tuple(
        dataclasses.replace(
            first, name=f"site-{kind}", site="site", server=spec.ServerSpec(kind=kind)
        )
        for kind in ("bind", "knot", "nsd")
    )
    plan = dataclasses.replace(plan, hosts=(plan.primary, *hosts))
    binaries = resolve_binaries([plan], NETNS, loaded.path)[0][plan.name]
    with RunStore.create(tmp_path / "results", "fleet", None, {}) as store:
        run_case(plan, store.folder / "cases" / "000-fleet", store, binaries)
    _, records = read_run(store.folder)
    assert len(records) == 3 * 2, [r.error for r in records]
    for record in records:
        assert record.ok and record.verified, (record.host, record.error)
        assert record.duration_s is not None and record.duration_s > 0.005  # the link's delay
        assert record.phases["notify_sent"] > 0  # each from its own NOTIFY
    assert {(r.host, r.secondary_kind) for r in records} == {
        ("site-bind", "bind"),
        ("site-knot", "knot"),
        ("site-nsd", "nsd"),
    }
    case = (store.folder / "cases" / "000-fleet" / "case.json").read_text()
    assert "site-nsd" in case and "xfb-" in case
    assert not [n for n in os.listdir("/run/netns") if n.startswith("xfb-") and n in case]
