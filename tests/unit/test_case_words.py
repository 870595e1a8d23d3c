"""Case names in words (report/labels.py): every preset, file zones, fleets, transports and
kinds, from the names spec/loader.py really makes of scenarios written by hand; the
machine key stays what the records and the page's data-case attributes hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import spec
from harness.report.labels import count_words, readable, readable_labels

QUICK_LIKE = """
repeats = 1
transports = ["tcp", "tcp-tsig", "xot", "xot-tsig"]
xfr = ["axfr", "ixfr"]
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "knot"
[matrix]
zones = [{ preset = "tiny" }, { preset = "tld", records = 10000 },
         { preset = "hosting", zones = 100 }, { preset = "tld", records = 1000000 }]
"""


def names(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    return [case.name for case in spec.load(path).cases]


def test_every_preset_transport_and_kind_in_words(tmp_path: Path) -> None:
    words = {name: readable(name) for name in names(tmp_path, QUICK_LIKE)}
    assert len(words) == 4 * 4 * 2
    assert words["bind-knot/preset=tld,records=10000/xot/ixfr"] == (
        "BIND → Knot · tld 10 k · XoT · IXFR"
    )
    assert words["bind-knot/preset=tiny/tcp-tsig/axfr"] == "BIND → Knot · tiny · TCP+TSIG · AXFR"
    assert words["bind-knot/preset=hosting,zones=100/xot-tsig/axfr"] == (
        "BIND → Knot · hosting 100 zones · XoT+TSIG · AXFR"
    )
    assert words["bind-knot/preset=tld,records=1000000/tcp/axfr"] == (
        "BIND → Knot · tld 1 M · TCP · AXFR"
    )
    assert len(set(words.values())) == len(words)  # each tells its case apart


def test_a_fleet_names_its_primary_and_every_kind(tmp_path: Path) -> None:
    fleet = """
repeats = 1
transports = ["tcp"]
xfr = ["axfr"]
[zones]
preset = "tld"
records = 2000
[servers.primary]
kind = "knot"
[[secondaries]]
name = "berlin"
kind = "bind"
[[secondaries]]
name = "tokyo"
kind = "nsd"
[[secondaries]]
name = "paris"
kind = "pdns"
[matrix]
"link.delay" = ["1ms", "75ms"]
"""
    got = [readable(name) for name in names(tmp_path, fleet)]
    assert got == [
        "Knot → BIND, NSD, PowerDNS · delay 1ms · TCP · AXFR",
        "Knot → BIND, NSD, PowerDNS · delay 75ms · TCP · AXFR",
    ]


def test_file_zones_read_as_their_file() -> None:
    assert readable("bind-bind/file=/srv/zones/example.test.zone/tcp/ixfr") == (
        "BIND → BIND · example.test.zone · TCP · IXFR"
    )
    assert readable("bind-bind/preset=file,file=zones/v01.zone/xot/axfr") == (
        "BIND → BIND · v01.zone · XoT · AXFR"
    )


def test_labels_faults_sites_and_pulls_stay_as_written() -> None:
    assert (
        readable("bind-bind+knot/tcp/axfr/link-down")
        == "BIND → BIND, Knot · TCP · AXFR · link-down"
    )
    assert readable("tw-reuse/xot/ixfr") == "tw-reuse · XoT · IXFR"
    assert readable("bind-knot/tcp/axfr @ near") == "BIND → Knot · TCP · AXFR @ near"
    assert readable("bind-bind/tcp/axfr [pull-own]") == "BIND → BIND · TCP · AXFR [pull-own]"
    assert readable("bind-bind/*") == "BIND → BIND · *"  # a shared part's pattern
    assert readable("") == ""
    assert readable("somebody-else/tcp") == "somebody-else · TCP"  # no server kind: as is


@pytest.mark.parametrize(
    ("value", "words"),
    [("999", "999"), ("1000", "1 k"), ("1500", "1.5 k"), ("10000", "10 k"), ("2500000", "2.5 M")],
)
def test_counts(value: str, words: str) -> None:
    assert count_words(value) == words


def test_labels_that_would_read_alike_stay_as_they_were() -> None:
    short = {"a/tcp": "tcp", "b/TCP": "TCP"}  # both read "TCP"
    assert readable_labels(short) == short
