"""How long a primary is given to load its zones before the case fails.

A 14 M-record zone (scenarios/tld.toml) took BIND 53 s to load on this machine at load 2, and
more than 120 s at load 4 or more: with a fixed 120 s limit the whole scenario failed
("the primary never served cz. serial 1") although it allows 1800 s. The primary is given the
start limit plus the scenario's timeout, as the secondaries' first copies are."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.core.transport import TCP
from harness.measure import live
from harness.measure.protocol import START_TIMEOUT
from harness.xfr import XfrTimeout


class _NoWire:
    def __enter__(self) -> _NoWire:
        return self


class _Place:
    address = "192.0.2.1"

    def wire(self, peers: list[str]) -> _NoWire:
        return _NoWire()

    def here(self, local: Path) -> Path:
        return local


def primary_loading_for(
    seconds: float | None, timeout: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> live.LiveCase:
    """A LiveCase whose primary first serves its zone `seconds` after it starts (None:
    never), on a clock that stands at 0; the servers, the wire and the testbed are fakes."""
    monkeypatch.setattr(live.srv, "primary_zones", lambda files, place, workdir, binary: [])
    monkeypatch.setattr(live.srv, "spawn", lambda running: None)
    plan = SimpleNamespace(
        primary=SimpleNamespace(name="primary"), secondaries=[], timeout=timeout, transport=TCP
    )
    zones = SimpleNamespace(files=[SimpleNamespace(origin="cz.", serial=1)])
    places = SimpleNamespace(place=lambda name: _Place(), sampling=lambda sampler: sampler)
    case = live.LiveCase(plan, tmp_path, places, {}, zones, None, None)  # type: ignore[arg-type]
    fake: Any = case
    fake.clock = lambda: 0.0
    fake._server = lambda name, zones, workdir: SimpleNamespace(place=_Place())
    fake._watch = lambda: None
    fake._poll = lambda running, zone, serial, deadline: (
        seconds if seconds is not None and seconds <= deadline else None
    )
    return case


def test_a_large_zone_may_load_for_longer_than_the_start_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = primary_loading_for(START_TIMEOUT + 180, 1800.0, tmp_path, monkeypatch)
    case.start_primary()  # no XfrTimeout: the scenario's 1800 s covers a 300 s load
    assert case.primary is not None


def test_a_primary_that_never_serves_fails_after_the_limit_and_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = primary_loading_for(None, 600.0, tmp_path, monkeypatch)
    with pytest.raises(XfrTimeout, match=f"timeout after {START_TIMEOUT + 600:g} s: the primary"):
        case.start_primary()
