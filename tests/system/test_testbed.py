"""The netns testbed for real: topology, per-host sysctls, impairments, exact teardown.

Needs root, network namespaces and a built linkem (the session fixture builds it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.errors import EnvironmentProblem, UserInputError
from harness.link import linkem
from harness.link.bounds import goodput_at_rate_bps
from harness.linktest import tools as measure
from harness.spec import HostsSpec, LinkSpec
from harness.testbed import Testbed, clean_leftovers
from harness.testbed import registry as reg

pytestmark = [pytest.mark.root, pytest.mark.netns]

REPO = Path(__file__).resolve().parents[2]
CC_ALLOWED = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"


def _init_state() -> dict[str, str]:
    return {
        "iptables": _strip_comments(
            subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
        ),
        "cc_allowed": Path(CC_ALLOWED).read_text(),
    }


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def _netns() -> set[str]:
    try:
        return {p.name for p in Path("/run/netns").iterdir()}
    except FileNotFoundError:
        return set()


@pytest.fixture(scope="session")
def linkem_built() -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    manifest = REPO / "linkem" / "Cargo.toml"
    if os.environ.get("XFRBENCH_LINKEM"):
        return Path(os.environ["XFRBENCH_LINKEM"])
    if not manifest.exists():
        pytest.skip("linkem sources are absent (linkem/Cargo.toml)")
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(cargo).exists():
        if linkem.DEFAULT_BINARY.exists():
            return linkem.DEFAULT_BINARY
        pytest.skip("cargo is not installed and linkem is not built")
    subprocess.run(
        [cargo, "build", "--release", "--quiet", "--manifest-path", str(manifest)],
        check=True,
        timeout=900,
    )
    return linkem.DEFAULT_BINARY


@pytest.fixture
def registry_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private registry directory, and a check that the test left the host as it found it."""
    directory = tmp_path / "registry"
    monkeypatch.setenv("XFRBENCH_REGISTRY_DIR", str(directory))
    # Other runs may build testbeds meanwhile (this host is shared): track our own ids only.
    ids: list[str] = []
    create = reg.Registry.create.__func__  # type: ignore[attr-defined]

    def recording_create(
        cls: type[reg.Registry], directory: Path, testbed_id: str, **meta: object
    ) -> reg.Registry:
        ids.append(testbed_id)
        return create(cls, directory, testbed_id, **meta)

    monkeypatch.setattr(reg.Registry, "create", classmethod(recording_create))
    before = _init_state()
    yield directory
    leftovers = sorted(p.name for p in directory.glob("*.json")) if directory.exists() else []
    ours = {name for name in _netns() if any(name.startswith(f"xfb-{i}-") for i in ids)}
    after = _init_state()
    assert not leftovers, f"registry files left: {leftovers}"
    assert not ours, f"namespaces left: {ours}"
    assert after["iptables"] == before["iptables"]
    # Congestion controls another live run (default registry) added may come and go.
    others = reg.cc_needed_by_others(reg.load_all(reg.DEFAULT_DIR)[0], "")
    assert set(after["cc_allowed"].split()) - others == set(before["cc_allowed"].split()) - others


def _link(**raw: object) -> LinkSpec:
    return LinkSpec.model_validate(raw)


def _router_rules(bed: Testbed) -> str:
    return bed.router.run(["iptables", "-w", "-S", "FORWARD"]).stdout


def test_topology_addresses_and_reachability(registry_dir: Path, tmp_path: Path) -> None:
    with Testbed(_link(), HostsSpec(), tmp_path / "run", label="topology") as bed:
        assert bed.backend == "none"
        ids = {bed.primary.netns, bed.router.netns, bed.secondary.netns}
        assert ids == {f"xfb-{bed.testbed_id}-{s}" for s in "prs"}
        assert ids <= _netns()
        for host in (bed.primary, bed.secondary):
            addrs = host.run(["ip", "-4", "-o", "addr", "show", "dev", "veth-r"]).stdout
            assert f" {host.address}/" in addrs
            assert host.run(["ip", "-o", "link", "show", "lo"]).stdout.count("UP") >= 1
        assert bed.router.sysctl("net.ipv4.ip_forward") == "1"
        ping = bed.primary.run(["ping", "-c", "2", "-i", "0.05", "-W", "2", bed.secondary.address])
        assert "2 received" in ping.stdout
        # Routed through the router: TTL decremented once.
        assert "ttl=63" in ping.stdout
        assert "NFQUEUE" not in _router_rules(bed)  # the fast path: no emulator at all
        assert bed.link_counters() == {}
        desc = bed.describe()
        json.dumps(desc)
        assert desc["hosts"]["primary"]["address"] == bed.primary.address
        registry_file = registry_dir / f"{bed.testbed_id}.json"
        assert registry_file.exists() and oct(registry_dir.stat().st_mode & 0o777) == "0o700"
    assert not ids & _netns()


def test_host_sysctls_applied_and_cc_allowed_then_restored(
    registry_dir: Path, tmp_path: Path
) -> None:
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    if "cubic" not in available:
        pytest.skip("cubic is not available")
    before = Path(CC_ALLOWED).read_text()
    hosts = HostsSpec.model_validate(
        {
            "primary": {
                "congestion_control": "cubic",
                "sysctl": {"net.ipv4.tcp_wmem": "4096 16384 8388608"},
            },
            "secondary": {
                "congestion_control": "reno",
                "sysctl": {"net.ipv4.tcp_rmem": "4096 131072 16777216", "net.ipv4.tcp_sack": 0},
            },
        }
    )
    with Testbed(_link(), hosts, tmp_path / "run") as bed:
        assert bed.primary.sysctl("net.ipv4.tcp_congestion_control") == "cubic"
        assert bed.primary.sysctl("net.ipv4.tcp_wmem").split() == ["4096", "16384", "8388608"]
        assert bed.secondary.sysctl("net.ipv4.tcp_congestion_control") == "reno"
        assert bed.secondary.sysctl("net.ipv4.tcp_sack") == "0"
        assert "cubic" in Path(CC_ALLOWED).read_text().split()
        desc = bed.describe()
        assert (
            desc["hosts"]["secondary"]["sysctls_applied"]["net.ipv4.tcp_rmem"]
            == "4096 131072 16777216"
        )
        if "cubic" not in before.split():
            assert desc["init_netns_sysctls"][0]["key"] == "net.ipv4.tcp_allowed_congestion_control"
        bed.flush_route_metrics()
    others = reg.cc_needed_by_others(reg.load_all(reg.DEFAULT_DIR)[0], "")
    assert set(Path(CC_ALLOWED).read_text().split()) - others == set(before.split()) - others


def test_bad_sysctl_value_is_an_error_naming_the_key(registry_dir: Path, tmp_path: Path) -> None:
    hosts = HostsSpec.model_validate({"secondary": {"sysctl": {"net.ipv4.tcp_rmem": "lots"}}})
    with (
        pytest.raises(UserInputError, match=r"hosts\.secondary\.sysctl\.net\.ipv4\.tcp_rmem"),
        Testbed(_link(delay="5ms"), hosts, tmp_path / "run"),
    ):
        pass


# Alone (tests/conftest.py): the RTT is measured within 2 %.
@pytest.mark.alone
def test_delay_shows_in_rtt_and_only_impaired_directions_are_queued(
    linkem_built: Path, registry_dir: Path, tmp_path: Path
) -> None:
    with Testbed(_link(forward={"delay": "50ms"}), HostsSpec(), tmp_path / "run") as bed:
        assert bed.backend in ("linkem", "netem")
        rtt = measure.measure_rtt(bed, count=50, interval=0.01)
        assert rtt.samples == 50
        assert measure.within(rtt.mean_ms, 50.0, absolute=1.0, relative=0.02), rtt
        assert rtt.min_ms >= 50.0
        if bed.backend == "linkem":
            rules = _router_rules(bed)
            assert "--queue-num 10" in rules and "--queue-num 11" not in rules
            time.sleep(0.3)
            counters = bed.link_counters()
            assert counters["forward"]["passed"] >= 50
            assert counters["reverse"] == {}
            linkem_pid = next(iter(bed._procs))
    if bed.backend == "linkem":
        assert reg.proc_start_time(linkem_pid) is None  # stopped with the testbed
        stats = json.loads((tmp_path / "run" / "linkem-stats.json").read_text())
        assert stats["directions"]["forward"]["received"] >= 50


# Alone (tests/conftest.py): the loss is measured within a tolerance.
@pytest.mark.alone
def test_loss_measured_within_tolerance(
    linkem_built: Path, registry_dir: Path, tmp_path: Path
) -> None:
    link = _link(forward={"delay": "2ms", "loss": "10%"}, reverse={"delay": "2ms"}, seed=7)
    with Testbed(link, HostsSpec(), tmp_path / "run") as bed:
        loss = measure.measure_loss(bed, packets=30_000)
        assert loss["forward"].sent == 30_000
        assert abs(loss["forward"].loss_percent - 10.0) <= 0.5, loss
        assert loss["reverse"].loss_percent <= 0.5, loss
        if bed.backend == "linkem":
            time.sleep(0.4)
            forward = bed.link_counters()["forward"]
            # Cross-check: what linkem dropped is what the receiver missed.
            missed = loss["forward"].sent - loss["forward"].received
            assert abs(forward["dropped_loss"] - missed) <= 5, (forward, missed)
            assert forward["dropped_overflow"] == 0


# Alone (tests/conftest.py): the rate is measured within 3 %.
@pytest.mark.alone
def test_rate_limit_within_three_percent(registry_dir: Path, tmp_path: Path) -> None:
    if not shutil.which("iperf3"):
        pytest.skip("iperf3 is not installed")
    rate = 50_000_000
    with Testbed(_link(rate="50mbit"), HostsSpec(), tmp_path / "run") as bed:
        assert bed.backend == "none"  # a rate alone needs no emulator
        assert "NFQUEUE" not in _router_rules(bed)
        goodput = goodput_at_rate_bps(rate, 1500)
        # htb never exceeds the rate; reaching it needs CPU, which a busy shared host may
        # lack for a moment: up to three tries to reach it, and no try may exceed it.
        errors: list[float] = []
        for _ in range(3):
            before = bed.link_counters()["forward"]["htb"]["bytes"]
            start = time.monotonic()
            result = measure.measure_throughput(bed, duration=4, omit=1)
            elapsed = time.monotonic() - start
            wire = (bed.link_counters()["forward"]["htb"]["bytes"] - before) * 8 / elapsed
            assert wire <= rate * 1.03
            errors.append(result["throughput_bps"] / goodput - 1)
            assert errors[-1] <= 0.03, result
            if abs(errors[-1]) <= 0.03:
                break
    assert abs(errors[-1]) <= 0.03, errors


def test_netem_backend_refused_without_netem(registry_dir: Path, tmp_path: Path) -> None:
    with (
        pytest.raises(EnvironmentProblem, match="no netem"),
        Testbed(
            _link(delay="10ms", backend="netem"),
            HostsSpec(),
            tmp_path / "run",
            netem_available=False,
        ),
    ):
        pass


DRIVER = """
import json, sys, time
from pathlib import Path
from harness.spec import HostsSpec, LinkSpec
from harness.testbed import Testbed
link = LinkSpec.model_validate({"delay": "20ms", "loss": "1%"})
hosts = HostsSpec.model_validate({"primary": {"congestion_control": "cubic"}})
with Testbed(link, hosts, Path(sys.argv[1])) as bed:
    bed.set_global_sysctl("net.core.rmem_max", str(int(sys.argv[2])))
    print(json.dumps({"id": bed.testbed_id, "pids": list(bed._procs),
                      "netns": [bed.primary.netns, bed.router.netns, bed.secondary.netns]}),
          flush=True)
    time.sleep(600)
"""


def _start_driver(tmp_path: Path) -> tuple[subprocess.Popen[str], dict[str, object]]:
    rmem = int(Path("/proc/sys/net/core/rmem_max").read_text()) + 4096
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path / "run"), str(rmem)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        pytest.fail(f"driver failed: {proc.stderr.read() if proc.stderr else ''}")
    return proc, json.loads(line)


def test_sigkilled_driver_is_cleaned_up(
    linkem_built: Path, registry_dir: Path, tmp_path: Path
) -> None:
    before_cc = Path(CC_ALLOWED).read_text()
    before_rmem = Path("/proc/sys/net/core/rmem_max").read_text()
    proc, info = _start_driver(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    # Everything is still there: nobody tore it down.
    assert set(info["netns"]) <= _netns()  # type: ignore[arg-type]
    assert (registry_dir / f"{info['id']}.json").exists()
    pids = [int(p) for p in info["pids"]]  # type: ignore[union-attr]
    assert all(reg.proc_start_time(pid) is not None for pid in pids)
    assert Path("/proc/sys/net/core/rmem_max").read_text() != before_rmem
    removed = clean_leftovers()
    assert any("namespace" in line for line in removed)
    assert not set(info["netns"]) & _netns()  # type: ignore[arg-type]
    assert all(reg.proc_start_time(pid) is None for pid in pids)
    assert not (registry_dir / f"{info['id']}.json").exists()
    others = reg.cc_needed_by_others(reg.load_all(reg.DEFAULT_DIR)[0], "")
    assert set(Path(CC_ALLOWED).read_text().split()) - others == set(before_cc.split()) - others
    assert Path("/proc/sys/net/core/rmem_max").read_text() == before_rmem
    assert clean_leftovers() == []  # idempotent


def test_sigterm_tears_down_in_the_driver(
    linkem_built: Path, registry_dir: Path, tmp_path: Path
) -> None:
    proc, info = _start_driver(tmp_path)
    proc.send_signal(signal.SIGTERM)
    proc.wait(20)
    assert not set(info["netns"]) & _netns()  # type: ignore[arg-type]
    assert not (registry_dir / f"{info['id']}.json").exists()
    pids = [int(p) for p in info["pids"]]  # type: ignore[union-attr]
    assert all(reg.proc_start_time(pid) is None for pid in pids)


def test_live_driver_is_left_alone_by_clean(registry_dir: Path, tmp_path: Path) -> None:
    with Testbed(_link(), HostsSpec(), tmp_path / "run") as bed:
        assert clean_leftovers() == []
        assert bed.primary.netns in _netns()
