"""Own zone files (`[zones] file` / `versions`): the streamed reader's refusals, each with
the file and line; the versions' diff; the cache by content; the count of versions a run
needs. Every zone here is a file written by hand, as a user writes one."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import spec, zonegen
from harness.core.errors import UserInputError
from harness.plan.case import plan_case
from harness.plan.versions import check_versions, versions_needed
from harness.spec.zonefiles import _checker
from harness.zonegen import ownzone

ZONE = """$ORIGIN example.test.
$TTL 300
@     IN SOA ns1 hostmaster ( {serial} 7200 900 1209600 300 )
      IN NS  ns1
ns1   IN A   192.0.2.1
www   IN A   192.0.2.{www}
{extra}"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def zone(serial: int = 1, www: int = 10, extra: str = "") -> str:
    return ZONE.format(serial=serial, www=www, extra=extra)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFRBENCH_ZONE_CACHE", str(tmp_path / "cache"))


def refused(path: Path, origin: str | None = None) -> str:
    with pytest.raises(UserInputError) as info:
        ownzone.load(path, origin, check=_checker(origin))
    assert info.value.exit_status == 2
    return str(info.value)


def test_a_zone_with_directives_reads_as_one_absolute_record_per_line(tmp_path: Path) -> None:
    write(tmp_path, "hosts.inc", "mail IN A 192.0.2.3\n$ORIGIN sub.example.test.\nx A 192.0.2.4\n")
    extra = (
        '$GENERATE 1-3 h$ A 192.0.2.${100,3}\n$INCLUDE hosts.inc\nafter TXT "back at" "origin"\n'
        "deleg NS ns.deleg\nns.deleg A 192.0.2.9\n"
    )
    own = ownzone.load(write(tmp_path, "z.zone", zone(extra=extra)), check=_checker(None))
    lines = own.path.read_text().splitlines()
    assert own.origin == "example.test." and own.serial == 1 and own.records == 12
    assert "h2.example.test.\t300\tIN\tA\t192.0.2.102" in lines
    assert "x.sub.example.test.\t300\tIN\tA\t192.0.2.4" in lines
    assert 'after.example.test.\t300\tIN\tTXT\t"back at" "origin"' in lines
    assert "deleg.example.test.\t300\tIN\tNS\tns.deleg.example.test." in lines
    assert own.types["A"] == 8 and "A 67 %" in own.type_mix()


def test_a_syntax_error_is_refused_with_its_file_and_line(tmp_path: Path) -> None:
    text = refused(write(tmp_path, "z.zone", zone(extra="bad IN A 192.0.2\n")))
    assert (
        f"{tmp_path}/z.zone:7: cannot read the record 'bad.example.test. 300 IN A 192.0.2'" in text
    )


def test_an_unknown_type_names_its_line(tmp_path: Path) -> None:
    text = refused(write(tmp_path, "z.zone", zone(extra="\nbad IN FROB x\n")))
    assert f"{tmp_path}/z.zone:8: 'FROB' is not a record type" in text


def test_a_record_outside_the_origin_is_refused(tmp_path: Path) -> None:
    text = refused(write(tmp_path, "z.zone", zone(extra="www.other.test. IN A 192.0.2.1\n")))
    assert f"{tmp_path}/z.zone:7: www.other.test. is outside the zone example.test." in text


def test_a_zone_without_soa_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "z.zone", "$ORIGIN example.test.\n$TTL 1\n@ NS ns1\n")
    assert f"{path}:1: the zone has no SOA record" in refused(path, "example.test.")
    assert f"{path}:3: the first record (example.test.) is not an SOA" in refused(path)


def test_a_zone_without_apex_ns_is_refused_at_its_soa(tmp_path: Path) -> None:
    text = refused(
        write(tmp_path, "z.zone", "$TTL 1\nexample.test. SOA ns hm 1 2 3 4 5\nx NS ns.x\n")
    )
    assert f"{tmp_path}/z.zone:2: the zone has no NS record at its apex" in text


def test_an_include_outside_the_zones_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "zone").mkdir()
    write(tmp_path, "secret.inc", "x A 192.0.2.1\n")
    text = refused(write(tmp_path / "zone", "z.zone", zone(extra="$INCLUDE ../secret.inc\n")))
    assert f"{tmp_path}/zone/z.zone:7: $INCLUDE ../secret.inc leaves the zone's folder" in text


def test_a_given_origin_must_own_the_soa(tmp_path: Path) -> None:
    text = refused(write(tmp_path, "z.zone", zone()), "other.test.")
    assert "z.zone:3: the SOA is for example.test., not for the origin other.test." in text


def test_serials_must_increase_between_versions(tmp_path: Path) -> None:
    one = write(tmp_path, "v1.zone", zone(serial=5))
    two = write(tmp_path, "v2.zone", zone(serial=5, www=11))
    with pytest.raises(UserInputError) as info:
        ownzone.load_versions([one, two], None)
    text = str(info.value)
    assert f"{two}:3: version 2's SOA serial 5 does not increase on v1.zone's 5" in text
    assert "raise its serial above 5" in text


def test_the_change_set_is_the_difference_of_two_versions(tmp_path: Path) -> None:
    one = write(tmp_path, "v1.zone", zone(serial=5, extra="old A 192.0.2.7\n"))
    two = write(tmp_path, "v2.zone", zone(serial=9, www=11, extra="new A 192.0.2.8\n"))
    chain = ownzone.load_versions([one, two], None)
    spec_ = zonegen.ZoneSpec("file", 7, "example.test.", serial=5, file=str(one),
                             versions=(str(one), str(two)))  # fmt: skip
    change = zonegen.change_set(spec_, serial_to=6, changes=0, whole_zone=True)
    assert (change.deleted, change.added, change.version) == (2, 2, str(two))
    assert change.changed_bytes == len(
        "old.example.test.\t300\tIN\tA\t192.0.2.7\nwww.example.test.\t300\tIN\tA\t192.0.2.10\n"
        "new.example.test.\t300\tIN\tA\t192.0.2.8\nwww.example.test.\t300\tIN\tA\t192.0.2.11\n"
    )
    deleted, added = zonegen.read_diff(change.diff_path, "example.test.")
    assert sorted(f"{name} {rdata}" for name, _, rdata in deleted) == [
        "example.test. ns1.example.test. hostmaster.example.test. 5 7200 900 1209600 300",
        "old.example.test. 192.0.2.7", "www.example.test. 192.0.2.10",
    ]  # fmt: skip
    assert change.zone_path is not None
    whole = change.zone_path.read_text()
    assert "hostmaster.example.test. 6 7200" in whole and "new.example.test." in whole
    assert chain[1].serial == 9  # the file's own serial; the published one counts publishes
    with pytest.raises(UserInputError, match="needs version 3, and the history has 2"):
        zonegen.change_set(spec_, serial_to=7, changes=0)


def test_the_cache_is_keyed_by_content(tmp_path: Path) -> None:
    write(tmp_path, "part.inc", "mail A 192.0.2.3\n")
    path = write(tmp_path, "z.zone", zone(extra="$INCLUDE part.inc\n"))
    first = ownzone.load(path)
    assert not first.cached and ownzone.load(path).cached
    write(tmp_path, "part.inc", "mail A 192.0.2.4\n")  # an include changed: read again
    again = ownzone.load(path)
    assert not again.cached and again.path != first.path
    assert "192.0.2.4" in again.path.read_text()


def _scenario(tmp_path: Path, repeats: int, versions: int) -> Path:
    folder = tmp_path / "history"
    folder.mkdir()
    for i in range(1, versions + 1):
        write(folder, f"v{i:02d}.zone", zone(serial=i, www=i))
    return write(
        tmp_path,
        "s.toml",
        f"""
repeats = {repeats}
xfr = ["ixfr"]
transports = ["tcp", "xot"]
[zones]
versions = "history"
""",
    )


def test_a_run_needing_more_versions_than_given_is_refused(tmp_path: Path) -> None:
    loaded = spec.load(_scenario(tmp_path, 2, 3))
    zones = loaded.scenario.zones
    assert zones.origin == "example.test." and zones.records == 4 and zones.serial == 1
    plans = [plan_case(case) for case in loaded.cases]
    assert versions_needed(plans) == 1 + 1 + 4 + 3  # warm-up, repeats, switch proofs
    with pytest.raises(UserInputError, match="it needs up to 9 versions, 3 given"):
        check_versions(plans, loaded.path)


def test_file_must_name_the_first_version(tmp_path: Path) -> None:
    path = _scenario(tmp_path, 1, 3)
    path.write_text(path.read_text() + 'file = "history/v02.zone"\n')
    with pytest.raises(UserInputError, match="is not the first version"):
        spec.load(path)


def test_the_report_names_an_own_zone_by_origin_file_and_type_mix() -> None:
    from harness.report.data import own_zone_text

    zone = {"origin": "example.test.", "file": "/z/v01.zone", "versions": 3, "records": 1500,
            "bytes": 96_000, "type_mix": "RRSIG 39 %, NSEC3 20 %"}  # fmt: skip
    assert own_zone_text(zone) == (
        "example.test. from v01.zone (3 versions): 1,500 records, 93.8 KiB; RRSIG 39 %, NSEC3 20 %"
    )
    assert own_zone_text(None) is None


BAD_INPUTS = {  # scenario's [zones] (and servers) -> the file, line and fix it must name
    "syntax": ('file = "z.zone"', "z.zone:7: cannot read the record", "correct the line"),
    "outside": ('file = "z.zone"', "z.zone:7: www.other.test. is outside", "remove the record"),
    "no SOA": ('file = "nosoa.zone"', "nosoa.zone:3: the first record", "put the SOA first"),
    "serials": ('versions = "v"', "v2.zone:3: version 2's SOA serial 5", "raise its serial"),
    "include": ('file = "sub/z.zone"', "z.zone:7: $INCLUDE ../x.inc leaves", "put the included"),
    "listen-on": (
        'file = "v/v1.zone"\n[servers.primary]\nkind = "bind"\nconfig = "named.snippet"',
        "named.snippet line 1: 'listen-on' is set by xfrbench",
        "fix: remove it from the snippet",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_run_refuses_bad_input_with_its_file_line_and_fix(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    extra = {"syntax": "bad IN A 192.0.2\n", "outside": "www.other.test. IN A 192.0.2.1\n"}
    write(tmp_path, "z.zone", zone(extra=extra.get(case, "")))
    write(tmp_path, "nosoa.zone", "$ORIGIN example.test.\n$TTL 1\n@ NS ns1\n")
    (tmp_path / "sub").mkdir()
    write(tmp_path, "x.inc", "x A 192.0.2.1\n")
    write(tmp_path / "sub", "z.zone", zone(extra="$INCLUDE ../x.inc\n"))
    (tmp_path / "v").mkdir()
    write(tmp_path / "v", "v1.zone", zone(serial=5))
    write(tmp_path / "v", "v2.zone", zone(serial=5, www=11))
    write(tmp_path, "named.snippet", "listen-on { any; };\n")
    zones, where, fix = BAD_INPUTS[case]
    path = write(tmp_path, "s.toml", f'repeats = 1\nxfr = ["ixfr"]\n[zones]\n{zones}\n')
    assert main(["run", "--dry-run", str(path)]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert where in said and fix in said, said
