"""Scenario validation: bad inputs are rejected with a message naming file, key and fix."""

from pathlib import Path

import pytest

from harness import spec
from harness.cli import main
from harness.core.errors import ScenarioError

REPO = Path(__file__).resolve().parents[2]

# (scenario text, the key path the message must name, words that must appear in it)
BAD_SCENARIOS = {
    "unknown top-level key": ("foo = 1", "foo", "unknown key; allowed keys here: name"),
    "unknown nested key": ('[zones]\npreset="tld"\nrecordz=5', "zones.recordz", "allowed keys"),
    "cold-start poll rate not a rate": (
        'cold_start_poll = "slow"',
        "cold_start_poll",
        'give SOA queries per second (10 to 1000000), or "off"',
    ),
    "loss above 100 %": ('[link]\nloss="120%"', "link.loss.p", "allowed: 0% to 100%"),
    "negative loss": ("[link.forward]\nloss=-1", "link.forward.loss.p", "0% to 100%"),
    "negative delay": ('[link]\ndelay="-5ms"', "link.delay", "negative"),
    "zero records": ('[zones]\npreset="tld"\nrecords=0', "zones.records", "greater than or equal"),
    "unknown server kind": (
        '[servers.primary]\nkind="powerdns"',
        "servers.primary.kind",
        "'bind', 'knot', 'nsd' or 'pdns'",
    ),
    "unparsable duration unit": ('[link]\ndelay="5 parsecs"', "link.delay", "use us, ms, s"),
    "rate in bytes": ('[link]\nrate="10mbps"', "link.rate", "bits per second"),
    "rate without unit": ("[link]\nrate=100", "link.rate", "no unit"),
    "bad TSIG algorithm": ('tsig_algorithm="hmac-md5"', "tsig_algorithm", "hmac-sha256"),
    "TOML syntax error": ("[link\ndelay=1", "", "TOML syntax error"),
    "unknown transport": ('transports=["doh"]', "transports[0]", "'xot-tsig'"),
    "duplicate transport": ('transports=["tcp","tcp"]', "transports", "twice"),
    "empty xfr list": ("xfr=[]", "xfr", "at least 1"),
    "wrong type": ('repeats="three"', "repeats", "not a number of repeats: give 1 to 10000"),
    "zero repeats": ("repeats=0", "repeats", 'give 1 to 10000, or "auto"'),
    "auto settings without auto": ("repeats_auto = { min = 3 }", "repeats_auto", "applies to"),
    "auto max below an interval": (
        'repeats = "auto"\nrepeats_auto = { min = 2, max = 3 }',
        "repeats_auto",
        "too few",
    ),
    "unknown order": ('order = "random"', "order", "'interleaved', 'shuffled' or 'blocks'"),
    "option of another server": (
        '[servers.primary]\nkind="bind"\noptions={xfrd-tcp-max=3}',
        "servers.primary.options",
        "max-transfer-idle-in, max-transfer-time-in",
    ),
    "option of wrong type": (
        '[servers.secondary]\nkind="knot"\noptions={tcp-workers="many"}',
        "servers.secondary.options",
        "must be int",
    ),
    "global sysctl per host": (
        '[hosts.primary.sysctl]\n"net.core.rmem_max"=1',
        "hosts.primary.sysctl",
        "cannot be set per host",
    ),
    "unknown congestion control": (
        '[hosts.secondary]\ncongestion_control="compound"',
        "hosts.secondary.congestion_control",
        "'bbr'",
    ),
    "matrix key that does not exist": (
        '[matrix]\n"link.bogus"=["1ms"]',
        "link.bogus",
        "in the matrix case",
    ),
    "bad value in matrix": (
        '[matrix]\n"link.delay"=["1ms","-1ms"]',
        "link.delay",
        "matrix case link.delay=-1ms",
    ),
    "matrix value not a list": ('[matrix]\n"link.delay"="1ms"', "matrix.link.delay", "valid list"),
    "matrix over transports": (
        '[matrix]\ntransports=[["tcp"]]',
        "matrix.transports",
        "top-level key",
    ),
    "unknown link direction": ('[link.sideways]\ndelay="1ms"', "link.sideways", "forward, reverse"),
    "parameter of another loss model": (
        '[link.forward.loss]\nmodel="gemodel"\np="1%"\np13="3%"',
        "link.forward.loss",
        "do not apply to loss model 'gemodel'",
    ),
    "MTU too small": ("[link]\nmtu=100", "link.mtu", "greater than or equal to 576"),
    "jitter without delay": ('[link]\njitter="5ms"', "link.forward", "needs a delay"),
    "records on the tiny preset": ("[zones]\nrecords=5", "zones", "omit 'records'"),
    "zones on a non-hosting preset": ('[zones]\npreset="tld"\nzones=5', "zones", "hosting preset"),
    "bad origin": ('[zones]\norigin="a..b"', "zones.origin", "not a valid domain name"),
    "origin with a space": (
        '[zones]\norigin="bad name."',
        "zones.origin",
        "label 'bad name' holds ' '; use letters, digits, '-' and '_', e.g. 'example.'",
    ),
    "origin with an escaped dot": (
        '[zones]\norigin="a\\\\.b."',
        "zones.origin",
        "label 'a.b' holds '.'",
    ),
    "bare loss that may be a fraction": (
        "[link]\nloss = 0.015",
        "link.loss.p",
        "read as a percentage it is 0.015%, read as a fraction 1.5%; write '0.015%' or '1.5%'",
    ),
    "bare loss string": ('[link]\nloss = "2"', "link.loss.p", "write it like '2%'"),
    "bare gemodel parameter": (
        '[link.forward.loss]\nmodel="gemodel"\np="1%"\nr=0.25',
        "link.forward.loss.r",
        "read as a fraction 25%",
    ),
    "bare duplicate": ("[link.reverse]\nduplicate = 1", "link.reverse.duplicate", "no unit"),
    "IXFR on a cold start": (
        'trigger="cold-start"\nxfr=["axfr","ixfr"]',
        "(top level)",
        "always a full transfer",
    ),
    "unknown client pull": ('client_pulls=["curl"]', "client_pulls[0]", "'own' or 'kdig'"),
    "unknown verification": ('verify="both"', "verify", "'disk' or 'served'"),
    "disk verification of a cold start": (
        'trigger="cold-start"\nverify="disk"',
        "verify",
        "does not apply to a cold start: its many zones are read back over a few connections; "
        'set verify = "served" or remove the key',
    ),
    "zero timeout": ("timeout=0", "timeout", "more than 0"),
    "unknown trigger": ('trigger="carrier-pigeon"', "trigger", "'cold-start'"),
    "stream without its table": ('trigger="stream"', "(top level)", "needs a [stream] table"),
    "stream table without the trigger": (
        '[stream]\ninterval="1s"\nupdates=3',
        "(top level)",
        'applies to trigger = "stream" only',
    ),
    "stream with updates and duration": (
        'trigger="stream"\n[stream]\ninterval="1s"\nupdates=3\nduration="1m"',
        "stream",
        "exactly one of 'updates'",
    ),
    "stream interval too short": (
        'trigger="stream"\n[stream]\ninterval="1ms"\nupdates=3',
        "stream",
        "below 0.01 s",
    ),
    "stream arrival unknown": (
        'trigger="stream"\n[stream]\ninterval="1s"\nupdates=3\narrival="bursty"',
        "stream.arrival",
        "'fixed' or 'poisson'",
    ),
    "stream changes over 10 % of the zone": (
        'trigger="stream"\n[zones]\npreset="tld"\nrecords=1000\n'
        '[stream]\ninterval="1s"\nupdates=3\nchanges=101',
        "stream.changes",
        "more than 10 % of the 1,000-record zone; give at most 100, or more zones.records",
    ),
    "stream whose change sets outrun the delegations": (
        'trigger="stream"\nrepeats=2\ntransports=["tcp","xot"]\n[zones]\npreset="tld"\n'
        'records=2000\n[stream]\ninterval="1s"\nupdates=40\nchanges=20',
        "stream",
        "161 change sets (the warm-up, and up to 40 serials per repeat, case and transfer kind) "
        "of 20 changes edit 1,610 delegations; the 2,000-record zone has 771: give fewer",
    ),
    "stream of the default changes over 10 % of a matrix zone": (
        'trigger="stream"\n[zones]\npreset="tld"\nixfr_changes=50\n'
        '[stream]\ninterval="1s"\nupdates=3\n[matrix]\n"zones.records"=[1000, 400]',
        "zones.ixfr_changes",
        "(in the matrix case zones.records=400)",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_SCENARIOS))
def test_bad_scenario_is_rejected_with_file_key_and_fix(name: str, tmp_path: Path) -> None:
    text, key, words = BAD_SCENARIOS[name]
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        spec.load(path)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert f": {key}:" in message or key == ""
    assert words in message


@pytest.mark.parametrize("name", sorted(BAD_SCENARIOS))
def test_bad_scenario_through_the_cli_is_exit_2(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, key, words = BAD_SCENARIOS[name]
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["run", "--dry-run", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert f"error: {path}: {key}" in err and words in err and "Traceback" not in err


def test_cli_exit_status_2_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('transports=["doh"]')
    assert main(["run", "--dry-run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "transports[0]" in err and "Traceback" not in err


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no such scenario file"):
        spec.load(tmp_path / "nope.toml")


def test_link_common_keys_apply_to_both_directions_and_can_be_overridden(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[link]\ndelay="25ms"\nloss="1%"\n[link.reverse]\ndelay="5ms"\nrate="10mbit"')
    link = spec.load(path).scenario.link
    assert link.forward.delay == 0.025 and link.reverse.delay == 0.005
    assert link.forward.loss.p == 1.0 and link.reverse.loss.p == 1.0
    assert link.forward.rate is None and link.reverse.rate == 10_000_000
    assert link.impaired


def test_matrix_expands_to_product_of_axes_transports_and_xfr(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(
        'transports=["tcp","xot"]\nxfr=["axfr","ixfr"]\n'
        '[matrix]\nlink.delay=["10ms","100ms"]\n"servers.secondary.kind"=["bind","knot","nsd"]\n'
    )
    cases = spec.load(path).cases
    assert len(cases) == 2 * 3 * 2 * 2
    assert len({case.name for case in cases}) == len(cases)
    by_name = {case.name: case for case in cases}
    case = by_name["bind-knot/delay=100ms/xot/ixfr"]
    assert case.scenario.link.forward.delay == 0.1
    assert case.scenario.servers.secondary.kind == "knot"
    assert case.axes == {"link.delay": "100ms", "servers.secondary.kind": "knot"}


def test_matrix_table_values_merge_into_the_table(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(
        '[zones]\norigin="x."\nseed=7\n[matrix]\n'
        'zones=[{preset="tiny"},{preset="tld",records=5000}]\n'
    )
    cases = spec.load(path).cases
    assert [
        (c.scenario.zones.preset, c.scenario.zones.record_count, c.scenario.zones.seed)
        for c in cases
    ] == [("tiny", 2, 7), ("tld", 5000, 7)]


def test_matrix_tables_may_name_themselves_with_a_label(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text(
        '[matrix]\n"hosts.secondary.sysctl" = [\n'
        '  { label = "default-range", "net.ipv4.ip_local_port_range" = "32768 60999" },\n'
        '  { label = "tw-reuse", "net.ipv4.tcp_tw_reuse" = 1 },\n]\n'
    )
    cases = spec.load(path).cases
    assert [c.name for c in cases] == [
        "bind-bind/sysctl=default-range/tcp/axfr",
        "bind-bind/sysctl=tw-reuse/tcp/axfr",
    ]
    assert cases[1].axes == {"hosts.secondary.sysctl": "tw-reuse"}
    # The label names the case; it is not a sysctl.
    assert cases[1].scenario.hosts.secondary.sysctl == {"net.ipv4.tcp_tw_reuse": 1}
    path.write_text('[matrix]\n"hosts.secondary.sysctl" = [{ label = "a b", x = 1 }]\n')
    with pytest.raises(ScenarioError, match=r"matrix\.hosts\.secondary\.sysctl: label 'a b'"):
        spec.load(path)


def test_no_matrix_gives_one_case_per_transport_and_xfr(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('transports=["tcp","tcp-tsig","xot","xot-tsig"]\nxfr=["axfr","ixfr"]')
    assert len(spec.load(path).cases) == 8


def test_spec_hash_ignores_formatting_but_not_content(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in ("a.toml", "b.toml", "c.toml"))
    a.write_text('name="x"\n[link]\ndelay="150ms"\n')
    b.write_text('# a comment\nname = "x"\n[link]\ndelay = "0.15s"\n')
    c.write_text('name="x"\n[link]\ndelay="151ms"\n')
    assert spec.load(a).spec_hash == spec.load(b).spec_hash
    assert spec.load(a).spec_hash != spec.load(c).spec_hash


@pytest.mark.parametrize("path", sorted((REPO / "scenarios").glob("*.toml")), ids=lambda p: p.name)
def test_shipped_scenarios_validate(path: Path) -> None:
    loaded = spec.load(path)
    assert loaded.cases


def test_dry_run_prints_cases_without_root(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--dry-run", str(REPO / "scenarios" / "quick.toml")]) == 0
    out = capsys.readouterr().out
    assert "16 cases" in out and "xot-tsig" in out


def _dry_run(tmp_path: Path, text: str, *flags: str) -> tuple[int, Path]:
    path = tmp_path / "s.toml"
    path.write_text(text)
    status = main(["run", "--dry-run", str(path), *flags])
    return status, path


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return " ".join(capsys.readouterr().err.split())  # rich wraps long lines


@pytest.mark.parametrize(
    ("binary", "words"),
    [
        ("/nonexistent/sbin/named", "/nonexistent/sbin/named does not exist"),
        ("/tmp", "/tmp is not a program"),
        # A program, but not the kind's server: its version flag says nothing of BIND.
        ("/bin/true", "/bin/true is not a bind server that says its version"),
    ],
)
def test_dry_run_checks_a_configured_binary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], binary: str, words: str
) -> None:
    text = f'[servers.secondary]\nkind = "bind"\nbinary = "{binary}"\n'
    status, path = _dry_run(tmp_path, text)
    err = _err(capsys)
    assert status == 2, err
    assert f"{path}: servers.secondary.binary: {words}" in err
    assert "named" in err.split(words, 1)[1]  # the fix names the daemon to point at
    assert "Traceback" not in err


def test_a_binary_of_the_right_kind_passes_and_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.servers.binaries import check_host_binaries, find_binary

    named = find_binary("bind")
    if named is None:
        pytest.skip("no BIND on this host")
    text = f'[servers.primary]\nkind = "bind"\nbinary = "{named}"\n'
    status, _ = _dry_run(tmp_path, text)
    assert status == 0
    found = check_host_binaries([("primary", "bind", named)], tmp_path / "s.toml")
    assert found[("bind", str(named))].path == named
    assert f"bind {found[('bind', str(named))].version} ({named})" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "key", "words"),
    [
        (["--sample-interval", "0"], "--sample-interval", "more than 0 s, got 0; e.g."),
        (["--sample-interval", "nan"], "--sample-interval", "more than 0 s"),
        (["--prometheus-port", "99999"], "--prometheus-port", "not a TCP port; pick"),
        (["--prometheus-port", "-1"], "--prometheus-port", "not a TCP port"),
        (["--prometheus-address", "localhost"], "--prometheus-address", "e.g. 127.0.0.1"),
        (["--compose-project", "x"], "--compose-project", "add --backend compose"),
        (
            ["--backend", "compose", "--compose-project", "Bad Name"],
            "--compose-project",
            "use lowercase letters",
        ),
        (["--run-id", "a/b"], "--run-id", "not a plain folder name; use letters"),
    ],
)
def test_dry_run_checks_the_flags_run_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], key: str, words: str
) -> None:
    status, _ = _dry_run(tmp_path, 'transports = ["tcp"]\n', *flags)
    err = _err(capsys)
    assert status == 2, err
    assert f"error: {key}: " in err and words in err


def test_dry_run_refuses_a_non_empty_out_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "old-run"
    out.mkdir()
    (out / "run.json").write_text("{}")
    status, _ = _dry_run(tmp_path, "", "--out", str(out))
    err = _err(capsys)
    assert status == 2 and f"--out: result folder {out} already exists and is not empty" in err


def test_dry_run_checks_suites_against_the_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = '[servers.primary]\nkind = "bind"\nsuite = "trixie"\n'
    status, path = _dry_run(tmp_path, text)
    err = _err(capsys)
    assert status == 2
    assert f"{path}: servers.primary.suite: suite 'trixie' needs server images" in err
    assert "--backend compose" in err


def test_a_stream_plans_its_schedule_and_changes(tmp_path: Path) -> None:
    from harness.plan.case import plan_case

    path = tmp_path / "s.toml"
    path.write_text(
        'trigger="stream"\nxfr=["ixfr"]\nschedule_seed=7\n[zones]\npreset="tld"\n'
        'records=20000\nixfr_changes=20\n[stream]\ninterval="5s"\nduration="5m"\n'
        'sla="30s"\n'
    )
    plan = plan_case(spec.load(path).cases[0])
    assert plan.trigger == "stream" and plan.notify and plan.changes == 20
    assert plan.stream is not None and plan.stream.sla == 30.0 and plan.stream.seed == 7
    offsets = plan.stream.offsets(plan.name, 1)
    assert offsets == [5.0 * k for k in range(60)]  # due strictly before the 5 minutes end
    assert plan.transfers() == 3 * 60  # repeats x secondaries x serials


def test_disk_verification_of_a_server_without_a_disk_copy_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every dialect keeps one today; a server that keeps none is refused, not read back
    behind the scenario's back."""
    from harness.servers import DIALECTS

    monkeypatch.setattr(DIALECTS["nsd"], "keeps_disk_copy", False)
    path = tmp_path / "s.toml"
    path.write_text(
        'verify = "disk"\n[[secondaries]]\nname = "a"\nkind = "knot"\n'
        '[[secondaries]]\nname = "b"\nkind = "nsd"\n'
    )
    with pytest.raises(ScenarioError) as caught:
        spec.load(path)
    assert f"{path}: verify: " in str(caught.value)
    assert 'nsd keeps no copy of a zone the harness can read; set verify = "served"' in str(
        caught.value
    )
    path.write_text('[[secondaries]]\nname = "a"\nkind = "nsd"\n')
    assert spec.load(path).scenario.verify is None  # absent: decided per secondary, at run time
