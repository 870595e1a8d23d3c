"""The compose backend's pure decisions: scenario keys, backend checks, cleanup order."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import spec
from harness.cli import main
from harness.compose.backend import Backend, binary_in_image, check_scenario, suite_of_tag
from harness.core.errors import UserInputError
from harness.testbed import registry as reg


def _load(tmp_path: Path, text: str) -> spec.LoadedScenario:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return spec.load(path)


def test_suite_is_a_matrix_key_and_the_default_keeps_old_hashes(tmp_path: Path) -> None:
    loaded = _load(
        tmp_path,
        '[servers.secondary]\nkind = "knot"\n'
        '[matrix]\n"servers.secondary.suite" = ["bookworm", "trixie"]\n',
    )
    assert [c.scenario.servers.secondary.suite for c in loaded.cases] == ["bookworm", "trixie"]
    plain = _load(tmp_path, '[servers.secondary]\nkind = "knot"\n')
    explicit = _load(tmp_path, '[servers.secondary]\nkind = "knot"\nsuite = "bookworm"\n')
    assert plain.spec_hash == explicit.spec_hash
    other = _load(tmp_path, '[servers.secondary]\nkind = "knot"\nsuite = "trixie"\n')
    assert other.spec_hash != plain.spec_hash
    with pytest.raises(UserInputError, match="suite"):
        _load(tmp_path, '[servers.primary]\nkind = "bind"\nsuite = "sid"\n')


def test_a_suite_needs_the_compose_backend(tmp_path: Path) -> None:
    loaded = _load(tmp_path, '[servers.secondary]\nkind = "knot"\nsuite = "trixie"\n')
    with pytest.raises(UserInputError) as caught:
        check_scenario(loaded, Backend("netns"))
    assert caught.value.key == "servers.secondary.suite"
    assert "--backend compose" in str(caught.value)
    check_scenario(loaded, Backend("compose"))  # per-run projects pick the image
    static = Backend("compose", "xfrbench", {"primary": "xfrbench/server:bookworm"})
    static = Backend("compose", "p", static.running | {"secondary": "xfrbench/server:bookworm"})
    with pytest.raises(UserInputError, match="SECONDARY_SUITE=trixie"):
        check_scenario(loaded, static)


def test_faults_need_the_netns_backend(tmp_path: Path) -> None:
    loaded = _load(tmp_path, '[[faults]]\nkind = "primary-restart"\n')
    check_scenario(loaded, Backend("netns"))
    with pytest.raises(UserInputError) as caught:
        check_scenario(loaded, Backend("compose"))
    assert caught.value.key == "faults" and "--backend netns" in str(caught.value)


def test_images_and_binaries_per_role() -> None:
    knot = spec.ServerSpec(kind="knot", suite="trixie")
    assert Backend("netns").image_for("secondary", knot) is None
    assert Backend("compose").image_for("secondary", knot) == "xfrbench/server:trixie"
    static = Backend("compose", "p", {"secondary": "xfrbench/server:bookworm"})
    assert static.image_for("secondary", knot) == "xfrbench/server:bookworm"
    backports = spec.ServerSpec(kind="bind", suite="bookworm-backports")
    assert Backend("compose").link_image(backports) == "xfrbench/link:bookworm"
    assert binary_in_image("knot", None) == Path("/usr/sbin/knotd")
    assert binary_in_image("nsd", Path("/opt/nsd")) == Path("/opt/nsd")
    assert suite_of_tag("xfrbench/server:trixie") == "trixie"
    assert suite_of_tag("debian:trixie") is None


def test_compose_items_are_undone_after_what_runs_inside() -> None:
    items = [
        {"kind": "compose_project", "name": "xfb-0a1b2c", "file": "/r/compose/compose.json"},
        {"kind": "netns_attached", "name": "xfb-0a1b2c-p", "pid": 10},
        {"kind": "netns_sysctl", "netns": "xfb-0a1b2c-p", "key": "net.ipv4.tcp_sack", "old": "1"},
        {"kind": "qdisc", "netns": "xfb-0a1b2c-r", "dev": "eth0"},
        {"kind": "process", "pid": 99, "start": 5, "argv": ["named"]},
    ]
    actions, notes = reg.plan_cleanup(items, lambda pid: 5)
    assert [a.kind for a in actions] == [
        "kill",
        "qdisc",
        "netns_sysctl",
        "netns_attached",
        "compose_project",
    ]
    assert notes == []
    assert actions[-1].target == "xfb-0a1b2c"


def test_run_flags_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.toml"
    path.write_text("repeats = 1\n")
    assert main(["run", str(path), "--compose-project", "x"]) == 2
    assert "--backend compose" in capsys.readouterr().err
    assert main(["run", str(path), "--prometheus-address", "nowhere"]) == 2
