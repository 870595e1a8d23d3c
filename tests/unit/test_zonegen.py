"""Unit tests of harness.zonegen: small sizes, no root, no servers."""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path

import dns.name
import dns.rdatatype
import dns.rrset
import dns.zone
import pytest

from harness.commands import zones as cli
from harness.core.errors import UserInputError
from harness.xfr.digest import records_digest, zone_digest, zone_digest_dnspython
from harness.zonegen import (
    ZoneSpec,
    apply_diff,
    change_set,
    generate,
    tld,
)
from harness.zonegen import cache as zcache


def count_lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line and not line.startswith(";"))


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_tld_exact_counts_and_shape(cache_dir: Path) -> None:
    for records in (13, 14, 15, 16, 17, 18, 1000, 4321):
        result = generate(ZoneSpec("tld", records, "cz."), cache_dir=cache_dir)
        path = result.files[0].path
        assert count_lines(path) == records == result.files[0].records
        assert path.stat().st_size == result.files[0].bytes
        # loads (check_origin, parseable rdata) and every record is distinct
        zone = dns.zone.from_file(str(path), origin="cz.", relativize=False)
        assert sum(len(rds) for _, rds in zone.iterate_rdatasets()) == records


def test_tld_labels_unique_and_content_valid(cache_dir: Path) -> None:
    path = generate(ZoneSpec("tld", 8_000, "cz.", seed=7), cache_dir=cache_dir).files[0].path
    zone = dns.zone.from_file(str(path), origin="cz.", relativize=False)
    origin = dns.name.from_text("cz.")
    types = Counter()
    delegations = set()
    for name, rdataset in zone.iterate_rdatasets():
        types[rdataset.rdtype] += len(rdataset)
        if rdataset.rdtype == dns.rdatatype.NS and name != origin:
            delegations.add(name)
            for ns in rdataset:
                if ns.target.is_subdomain(origin):
                    # in-bailiwick NS: must be under its own delegation and have glue
                    assert ns.target.is_subdomain(name)
                    assert zone.get_rdataset(ns.target, "A") is not None
        if rdataset.rdtype == dns.rdatatype.DS:
            for ds in rdataset:
                assert ds.algorithm == 13 and ds.digest_type == 2 and len(ds.digest) == 32
            assert zone.get_rdataset(name, "NS") is not None
    # each delegation name appears once (the affine label map is a bijection)
    n = len(delegations)
    assert n > 2500
    assert 0.3 < types[dns.rdatatype.DS] / n < 0.5
    # glue only where an NS points in-bailiwick
    glue_owners = {name for name, rds in zone.iterate_rdatasets() if rds.rdtype == dns.rdatatype.A}
    assert all(
        name.labels[0] == b"ns1" or name.parent() == dns.name.from_text("ns.cz.")
        for name in glue_owners
    )


def test_tld_labels_unique_large_sample() -> None:
    plan = tld.plan("cz.", 600_000, 3)
    names = [tld.delegation_name(plan, d) for d in range(plan.delegations)]
    assert len(set(names)) == len(names)
    assert all(len(n.split(".")[0]) >= 6 for n in names[:1000])


def test_determinism(cache_dir: Path, tmp_path: Path) -> None:
    spec = ZoneSpec("tld", 3000, "cz.", seed=5)
    a = generate(spec, cache_dir=cache_dir)
    b = generate(spec, cache_dir=tmp_path / "other-cache")
    assert not b.cached
    assert a.files[0].path.read_bytes() == b.files[0].path.read_bytes()
    assert zone_digest(a.files[0].path, "cz.") == zone_digest(b.files[0].path, "cz.")
    c = generate(ZoneSpec("tld", 3000, "cz.", seed=6), cache_dir=cache_dir)
    assert zone_digest(c.files[0].path, "cz.") != zone_digest(a.files[0].path, "cz.")
    h1 = generate(ZoneSpec("hosting", 12, "h.example.", seed=1, zones=2), cache_dir=cache_dir)
    h2 = generate(ZoneSpec("hosting", 12, "h.example.", seed=2, zones=2), cache_dir=cache_dir)
    assert h1.files[0].origin != h2.files[0].origin


def test_records_digest_matches_zone_digest(cache_dir: Path) -> None:
    path = generate(ZoneSpec("tld", 500, "cz."), cache_dir=cache_dir).files[0].path
    zone = dns.zone.from_file(str(path), origin="cz.", relativize=False)
    rrsets = [rds for rds in zone.iterate_rdatasets()]
    stream = []
    for name, rds in rrsets:
        rrset = dns.rrset.RRset(name, rds.rdclass, rds.rdtype)
        rrset.update(rds)
        stream.append(rrset)
    stream.append(stream[0])  # an AXFR repeats the SOA at the end
    assert records_digest(reversed(stream), "cz.") == zone_digest(path, "cz.")


def test_tiny(cache_dir: Path) -> None:
    result = generate(ZoneSpec("tiny", 2, "Example"), cache_dir=cache_dir)
    assert result.spec.origin == "example."
    assert count_lines(result.files[0].path) == 2


def test_hosting_index_and_counts(cache_dir: Path, tmp_path: Path) -> None:
    spec = ZoneSpec("hosting", 15, "hosting.example.", zones=5)
    out = tmp_path / "out"
    result = generate(spec, output=out, cache_dir=cache_dir)
    assert result.index == out / "zones.index"
    rows = [line.split("\t") for line in result.index.read_text().splitlines()]
    assert len(rows) == 5 and len({r[0] for r in rows}) == 5
    for origin, file in rows:
        assert origin.endswith(".hosting.example.")
        assert count_lines(out / file) == 15
        zone_digest(out / file, origin)  # loads
    doc = json.loads((out / "zones.json").read_text())
    assert [z["origin"] for z in doc["zones"]] == [r[0] for r in rows]
    # minimum size 3 loads too
    small = generate(ZoneSpec("hosting", 3, "hosting.example.", zones=2), cache_dir=cache_dir)
    assert all(count_lines(f.path) == 3 for f in small.files)
    # output replaces an earlier generated folder, refuses a foreign one
    generate(ZoneSpec("hosting", 12, "hosting.example.", zones=2), output=out, cache_dir=cache_dir)
    assert len((out / "zones.index").read_text().splitlines()) == 2
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(UserInputError):
        generate(spec, output=foreign, cache_dir=cache_dir)


def test_cache_reuse_and_output_link(cache_dir: Path, tmp_path: Path) -> None:
    spec = ZoneSpec("tld", 1000, "cz.")
    first = generate(spec, cache_dir=cache_dir)
    second = generate(spec, cache_dir=cache_dir)
    assert not first.cached and second.cached
    assert first.files[0].path == second.files[0].path
    out = tmp_path / "zones" / "cz.zone"
    placed = generate(spec, output=out, cache_dir=cache_dir)
    assert placed.cached and placed.files[0].path == out
    assert out.read_bytes() == first.files[0].path.read_bytes()
    # different serial -> different entry
    assert not generate(ZoneSpec("tld", 1000, "cz.", serial=2), cache_dir=cache_dir).cached
    # a cache entry whose file changed size is rebuilt
    with open(first.files[0].path, "a") as f:
        f.write("junk\n")
    assert not generate(spec, cache_dir=cache_dir).cached


def test_cache_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFRBENCH_ZONE_CACHE", str(tmp_path / "envcache"))
    result = generate(ZoneSpec("tiny", 2, "example."))
    assert result.files[0].path.is_relative_to(tmp_path / "envcache")
    assert (tmp_path / "envcache" / ".gitignore").read_text() == "*\n"


def test_atomic_no_partial_entry(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = tld.render_range

    def failing(*args, **kwargs):  # fail after the first batch has been written
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("disk full (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(tld, "render_range", failing)
    spec = ZoneSpec("tld", 200_000, "cz.")
    with pytest.raises(OSError):
        generate(spec, cache_dir=cache_dir)
    leftovers = [p for p in cache_dir.iterdir() if p.name != ".gitignore"]
    assert leftovers == []
    monkeypatch.setattr(tld, "render_range", real)
    result = generate(spec, cache_dir=cache_dir)
    assert not result.cached and count_lines(result.files[0].path) == 200_000


def test_stale_tmp_swept(cache_dir: Path) -> None:
    root = zcache.cache_root(cache_dir)
    stale = root / ".tmp-tld-cz-999999999-abc"
    stale.mkdir()
    generate(ZoneSpec("tiny", 2, "example."), cache_dir=cache_dir)
    assert not stale.exists()


@pytest.mark.parametrize(
    ("spec", "preset_changes"),
    [
        (ZoneSpec("tld", 600, "cz.", seed=2), 7),
        (ZoneSpec("tld", 600, "cz.", seed=2), 1),
        (ZoneSpec("tld", 600, "cz.", seed=2), 0),
        (ZoneSpec("hosting", 12, "h.example.", zones=3), 4),
        (ZoneSpec("tiny", 2, "example.", serial=100), 1),
        (ZoneSpec("tiny", 2, "example."), 2),
    ],
)
def test_change_sets_compose(cache_dir: Path, spec: ZoneSpec, preset_changes: int) -> None:
    base = generate(spec, cache_dir=cache_dir).files[0]
    zone = dns.zone.from_file(str(base.path), origin=base.origin, relativize=False)
    for k in (1, 2, 3):
        cs = change_set(spec, spec.serial + k, preset_changes, cache_dir=cache_dir)
        assert (cs.serial_from, cs.serial_to) == (spec.serial + k - 1, spec.serial + k)
        assert cs.deleted == preset_changes // 2
        assert cs.added == preset_changes - preset_changes // 2
        assert cs.origin == base.origin
        zone = apply_diff(zone, cs.diff_path)
        assert zone_digest_dnspython(zone) == zone_digest(cs.zone_path, cs.origin)
        # the diff alone, applied to the previous full zone file, gives the same
        prev = (
            base.path
            if k == 1
            else change_set(
                spec, spec.serial + k - 1, preset_changes, cache_dir=cache_dir
            ).zone_path
        )
        again = apply_diff(prev, cs.diff_path, cs.origin)
        assert zone_digest_dnspython(again) == zone_digest(cs.zone_path, cs.origin)


def test_change_set_diff_format(cache_dir: Path) -> None:
    spec = ZoneSpec("tld", 1000, "cz.")
    cs = change_set(spec, 2, 5, cache_dir=cache_dir)
    lines = [x for x in cs.diff_path.read_text().splitlines() if not x.startswith(";")]
    assert len(lines) == 2 + 2 + 3
    assert lines[0].split("\t")[3] == "SOA" and " 1 " in lines[0]
    assert lines[3].split("\t")[3] == "SOA" and " 2 " in lines[3]
    assert count_lines(cs.zone_path) == 1000 + 1
    # cached on the second call, deterministic
    assert (
        change_set(spec, 2, 5, cache_dir=cache_dir).diff_path.read_bytes()
        == cs.diff_path.read_bytes()
    )


@pytest.mark.parametrize(
    "spec",
    [ZoneSpec("tld", 600, "cz.", seed=2), ZoneSpec("hosting", 12, "h.example."),
     ZoneSpec("tiny", 2, "example.")],
)  # fmt: skip
def test_a_diff_only_change_set_is_the_whole_ones_diff(cache_dir: Path, spec: ZoneSpec) -> None:
    changes = 2 if spec.preset == "tiny" else 5
    for k in (3, 1):  # a later serial first: no set before it is needed
        alone = change_set(spec, spec.serial + k, changes, cache_dir=cache_dir, whole_zone=False)
        assert alone.zone_path is None
        whole = change_set(spec, spec.serial + k, changes, cache_dir=cache_dir)
        assert whole.zone_path is not None and whole.zone_path.exists()
        assert alone.diff_path.read_bytes() == whole.diff_path.read_bytes()
        assert (alone.added, alone.deleted) == (whole.added, whole.deleted)
        # Once the whole set is cached, a diff-only request takes it.
        again = change_set(spec, spec.serial + k, changes, cache_dir=cache_dir, whole_zone=False)
        assert again.zone_path == whole.zone_path


def test_change_set_bad_input(cache_dir: Path) -> None:
    with pytest.raises(UserInputError) as err:
        change_set(ZoneSpec("tld", 100, "cz."), 1, 2, cache_dir=cache_dir)
    assert err.value.key == "--serial-to"
    with pytest.raises(UserInputError) as err:
        change_set(ZoneSpec("tld", 100, "cz."), 5, 1000, cache_dir=cache_dir)
    assert err.value.key == "--changes"
    with pytest.raises(UserInputError):
        change_set(ZoneSpec("tiny", 2, "example."), 2, 4, cache_dir=cache_dir)
    with pytest.raises(UserInputError):
        change_set(ZoneSpec("tiny", 2, "example.", signed=True), 2, 1, cache_dir=cache_dir)


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        (ZoneSpec("big", 10, "cz."), "preset"),  # type: ignore[arg-type]
        (ZoneSpec("tiny", 3, "cz."), "records"),
        (ZoneSpec("tld", 5, "cz."), "records"),
        (ZoneSpec("hosting", 2, "cz.", zones=3), "records"),
        (ZoneSpec("hosting", 12, "cz.", zones=0), "zones"),
        (ZoneSpec("tld", 100, "cz.", zones=2), "zones"),
        (ZoneSpec("tld", 100, "."), "origin"),
        (ZoneSpec("tld", 100, "bad name."), "origin"),
        (ZoneSpec("tld", 100, "cz.", serial=2**32), "serial"),
        (ZoneSpec("tld", 100, "cz.", seed=-1), "seed"),
    ],
)
def test_bad_spec(cache_dir: Path, spec: ZoneSpec, key: str) -> None:
    with pytest.raises(UserInputError) as err:
        generate(spec, cache_dir=cache_dir)
    assert err.value.key == key
    assert err.value.fix or err.value.problem


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (["--preset", "tld", "--records", "abc", "--origin", "cz."], "--records"),
        (["--preset", "tld", "--records", "3", "--origin", "cz."], "--records"),
        (["--preset", "tld", "--origin", "cz."], "--records"),
        (["--preset", "hosting", "--zones", "0", "--origin", "h.example."], "--zones"),
        (["--preset", "tiny", "--origin", "cz.", "--serial", "-1"], "--serial"),
        (["--preset", "nope", "--origin", "cz."], "--preset"),
    ],
)
def test_cli_bad_input(cache_dir: Path, argv: list[str], key: str) -> None:
    args = _parse(["zones", "generate", *argv, "--cache-dir", str(cache_dir)])
    with pytest.raises(UserInputError) as err:
        args.func(args)
    assert err.value.key == key


def test_cli_generate_changes_digest(
    cache_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cz.zone"
    args = _parse(
        [
            "zones",
            "generate",
            "--preset",
            "tld",
            "--records",
            "500",
            "--origin",
            "cz",
            "--output",
            str(out),
            "--cache-dir",
            str(cache_dir),
        ]
    )
    assert args.func(args) == 0
    assert count_lines(out) == 500
    assert "records/s" in capsys.readouterr().out
    args = _parse(
        [
            "zones",
            "changes",
            "--preset",
            "tld",
            "--records",
            "500",
            "--origin",
            "cz.",
            "--serial-to",
            "2",
            "--changes",
            "4",
            "--cache-dir",
            str(cache_dir),
        ]
    )
    assert args.func(args) == 0
    args = _parse(["zones", "digest", str(out), "--origin", "cz."])
    assert args.func(args) == 0
    assert zone_digest(out, "cz.") in capsys.readouterr().out
    args = _parse(["zones", "digest", str(tmp_path / "missing"), "--origin", "cz."])
    with pytest.raises(UserInputError):
        args.func(args)


def test_cache_default_location_is_repo_zones_cache() -> None:
    if os.environ.get("XFRBENCH_ZONE_CACHE"):
        pytest.skip("XFRBENCH_ZONE_CACHE set")
    root = zcache.cache_root()
    assert root == Path(__file__).resolve().parents[2] / "zones" / "cache"
