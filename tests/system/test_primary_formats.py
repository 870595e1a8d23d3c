"""A BIND primary serving a zone from its raw format (servers/bind.py primary_file): the
file converted once by named-compilezone and cached beside the generated one, loaded with
`masterfile-format raw`, taking a dynamic update, and every copy verified against the text
file's sum, as a text-served zone's is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.servers import bind
from tests.system.live_cases import first_copies

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

SCENARIO = (
    'repeats = 1\ntimeout = "30s"\ntrigger = "retransfer"\n'
    '[zones]\npreset = "tld"\nrecords = 2000\norigin = "raw.example."\n'
)


def test_a_large_zone_is_served_from_raw_and_its_copies_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bind, "RAW_FROM_BYTES", 1)  # this zone counts as large
    with first_copies(tmp_path, SCENARIO) as live:
        assert live.primary is not None
        (entry,) = live.primary.server.setup.zones
        assert entry.format == "raw"
        config = live.primary.server.config.read_text()
        assert "masterfile-format raw;" in config
        (generated,) = live.generated.files
        cached = generated.path.with_name(
            f"{generated.path.name}.bind-{live.binaries['primary'].version}.raw"
        )
        assert cached.read_bytes() == entry.file.read_bytes()  # the cached conversion
        assert not entry.file.read_bytes()[:200].isascii()  # raw, not master-file text
        # The first copy, then a new serial by dynamic update: both verified against the
        # text file's sum, which the raw one must serve record for record.
        check = live.verify("secondary", live.first_zone, live.base_serial)
        assert check.ok, check.problem
        live.publish(live.base_serial + 1)
        live.control("secondary", "retransfer", live.first_zone)
        served = live.wait_served(
            ["secondary"], live.first_zone, live.base_serial + 1, live.clock() + 30
        )
        assert "secondary" in served
        check = live.verify("secondary", live.first_zone, live.base_serial + 1)
        assert check.ok, check.problem
        assert live.check_primary(live.base_serial + 1) is None


def test_a_small_zone_stays_text(tmp_path: Path) -> None:
    with first_copies(tmp_path, SCENARIO.replace("raw.example.", "text.example.")) as live:
        assert live.primary is not None
        (entry,) = live.primary.server.setup.zones
        assert entry.format == "text"
        assert "masterfile-format" not in live.primary.server.config.read_text()
