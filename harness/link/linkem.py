"""Driving linkem, the user-space link emulator: its config (pure) and its binary.

linkem reads packets from NFQUEUE queues (one per direction), holds them for the configured
delay and gives them back with a verdict, applying netem's loss, duplication and reordering
models. Its probabilities are fractions (0..1); the scenario holds percent (0..100).

Seeds. Every random decision of one linkem instance comes from its config's `seed`; each
direction draws from its own stream, keyed in linkem by the direction's name (linkem/src/rng.rs),
so "reverse" makes the same decisions whether or not "forward" is emulated too. The seed is
`derive_seed(link.seed, case, instance)` (harness/core/seeds.py): the scenario's `link.seed`, the
case's name and the instance (`DEFAULT_INSTANCE`: one linkem per testbed). In a fleet every
direction is named after its secondary ("far-1 forward"), so each site draws from a stream of
its own. A case's drops are reproducible from the scenario alone, while two cases, or two
sites of one case, are independent samples (repeats continue the case's streams): with one
seed for all, 0.1 % loss first dropped after ~1,200-1,600 packets in every case, so small
cases never lost a packet and large ones lost the same packet numbers. Without a case (a
standalone link) the seed is `link.seed` itself.

Runtime control (faults). A linkem started with a `control_path` takes commands on that Unix
socket while it runs (linkem/README.md, "Runtime control"): a direction down, rate-limited or
otherwise impaired, a TCP connection cut by resets, back as configured. The commands are built
here (pure: `set_command`, `reset_command`, `restore_command`) and sent by `LinkemControl`;
each answer, and the events in the stats file, are linkem's own record of what it did.
Directions that `inspect` their packets' headers count bytes (`passed_bytes`), which the
fault flows use as the bytes a secondary received.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path
from typing import Any, Protocol

from harness.core.errors import EnvironmentProblem, XfrbenchError
from harness.core.seeds import derive_seed
from harness.link.netem import gemodel_params, queue_packets, state_params
from harness.spec import DirectionSpec, LinkSpec, LossSpec

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BINARY = REPO / "target" / "release" / "linkem"  # the cargo workspace's target/
FIRST_QUEUE = 10  # NFQUEUE numbers from here on, one per emulated direction
READY_LINE = "linkem ready"
# How often linkem rewrites its stats file: a transfer's counters are at most this late.
STATS_INTERVAL_MS = 50
# Without faults the stats file holds a few counters (under 1 kB): written this often, a
# transfer's counters and the link's queue are fresh within a hundredth of a second.
FAST_STATS_INTERVAL_MS = 10
DEFAULT_INSTANCE = "link"  # the one primary-secondary link of a case; a fleet names its sites


def find_binary() -> Path:
    override = os.environ.get("XFRBENCH_LINKEM")
    candidates = [Path(override)] if override else [DEFAULT_BINARY]
    if not override and (found := shutil.which("linkem")):
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise EnvironmentProblem(
        f"the linkem binary is missing (looked at {', '.join(map(str, candidates))}); "
        "build it with `make linkem` (cargo build --release --manifest-path linkem/Cargo.toml) "
        "or point XFRBENCH_LINKEM at it"
    )


def _fraction(percent: float) -> float:
    return round(percent / 100.0, 9)


def loss_config(loss: LossSpec) -> dict[str, Any]:
    if not loss.active:
        return {"model": "none"}
    if loss.model == "random":
        return {
            "model": "random",
            "p": _fraction(loss.p),
            "correlation": _fraction(loss.correlation),
        }
    if loss.model == "gemodel":
        p, r, one_minus_h, one_minus_k = map(_fraction, gemodel_params(loss))
        return {
            "model": "gemodel",
            "p": p,
            "r": r,
            "one_minus_h": one_minus_h,
            "one_minus_k": one_minus_k,
        }
    p13, p31, p32, p23, p14 = map(_fraction, state_params(loss))
    return {"model": "state", "p13": p13, "p31": p31, "p32": p32, "p23": p23, "p14": p14}


def direction_config(
    name: str, direction: DirectionSpec, *, queue: int, rtt: float, inspect: bool = False
) -> dict[str, Any]:
    return {
        "name": name,
        "queue": queue,
        "delay_us": round(direction.delay * 1e6),
        "jitter_us": round(direction.jitter * 1e6),
        "jitter_distribution": direction.jitter_distribution,
        "delay_correlation": _fraction(direction.delay_correlation),
        "loss": loss_config(direction.loss),
        "duplicate": _fraction(direction.duplicate),
        "duplicate_correlation": 0.0,
        "reorder": _fraction(direction.reorder),
        "reorder_correlation": 0.0,
        "reorder_gap": direction.reorder_gap,
        "queue_max_len": queue_packets(direction.rate, rtt, direction.mtu),
    } | ({"inspect": True} if inspect else {})


def instance_seed(link: LinkSpec, case: str | None, instance: str = DEFAULT_INSTANCE) -> int:
    """The seed of one linkem instance: `derive_seed(link.seed, case, instance)`, or
    `link.seed` unchanged when there is no case (a standalone link)."""
    return link.seed if case is None else derive_seed(link.seed, case, instance)


def config(
    directions: list[tuple[str, DirectionSpec, int]],
    *,
    rtt: float,
    seed: int,
    stats_path: Path,
    stats_interval_ms: int = STATS_INTERVAL_MS,
    control_path: Path | None = None,
    inspect: bool = False,
) -> dict[str, Any]:
    """linkem's config: (name, spec, NFQUEUE number) per emulated direction. `rtt` sizes
    the delay lines (the longest round trip they must cover); `seed` is the instance's
    (instance_seed: pass the case, or every case drops the same packets). `control_path`:
    its runtime control socket; `inspect`: every direction reads headers (bytes, TCP)."""
    out: dict[str, Any] = {
        "seed": seed,
        "stats_path": str(stats_path),
        "stats_interval_ms": stats_interval_ms,
    }
    if control_path is not None:
        out["control_path"] = str(control_path)
    out["directions"] = [
        direction_config(name, spec, queue=queue, rtt=rtt, inspect=inspect)
        for name, spec, queue in directions
    ]
    return out


def read_stats(path: Path) -> dict[str, Any]:
    """linkem's last stats snapshot ({} before the first one is written)."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


# --- runtime control ------------------------------------------------------------------------

CONTROL_DIR = Path("/run/xfrbench/linkem")  # short paths: a socket path fits 108 bytes
CONTROL_TIMEOUT = 5.0  # seconds: linkem answers once the direction's worker took the command


class LinkemControlError(XfrbenchError):
    """linkem refused a command or could not be reached."""


def set_command(
    direction: str,
    *,
    down: bool | None = None,
    rate_bps: int | None = None,
    queue_bytes: int | None = None,
    impair: dict[str, Any] | None = None,
    after_bytes: int = 0,
) -> dict[str, Any]:
    """Change `direction` (keys left None keep their value); `after_bytes`: once that much
    TCP payload has crossed it."""
    command: dict[str, Any] = {"cmd": "set", "direction": direction}
    for key, value in (
        ("down", down),
        ("rate_bps", rate_bps),
        ("queue_bytes", queue_bytes),
        ("impair", impair),
    ):
        if value is not None:
            command[key] = value
    if after_bytes:
        command["after_bytes"] = after_bytes
    return command


def impair_patch(delay_s: float | None = None, loss: LossSpec | None = None) -> dict[str, Any]:
    """An `impair` patch: another one-way delay and loss model for a while."""
    patch: dict[str, Any] = {}
    if delay_s is not None:
        patch["delay_us"] = round(delay_s * 1e6)
    if loss is not None:
        patch["loss"] = loss_config(loss)
    return patch


def reset_command(direction: str, *, after_bytes: int = 0) -> dict[str, Any]:
    """Cut the TCP connection crossing `direction` (its last data, or the packet with which
    `after_bytes` more bytes have crossed) with resets to both ends."""
    command: dict[str, Any] = {"cmd": "reset", "direction": direction}
    if after_bytes:
        command["after_bytes"] = after_bytes
    return command


def restore_command(direction: str) -> dict[str, Any]:
    return {"cmd": "restore", "direction": direction}


def checked(command: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """linkem's answer to `command`; raises LinkemControlError when it refused it (pure)."""
    if not answer.get("ok", False):
        raise LinkemControlError(
            f"linkem refused {json.dumps(command)}: {answer.get('error', answer)}"
        )
    return answer


class LinkControl(Protocol):
    """linkem's runtime control as the fault flows use it: `LinkemControl` (one linkem
    here), or remote/linkctl.py `HostsLinkControl` (a linkem on each host of an inventory).
    Times in answers and events are this machine's unix time."""

    def send(self, command: dict[str, Any]) -> dict[str, Any]: ...

    def stats(self) -> dict[str, Any]: ...


class LinkemControl:
    """A client of one linkem's control socket: one connection per command."""

    def __init__(self, path: Path, timeout: float = CONTROL_TIMEOUT) -> None:
        self.path = path
        self.timeout = timeout

    def send(self, command: dict[str, Any]) -> dict[str, Any]:
        """linkem's answer to `command`; raises LinkemControlError when it refused it."""
        return checked(command, self.ask(command))

    def stats(self) -> dict[str, Any]:
        """linkem's counters and events now (what its stats file will say next)."""
        return self.ask({"cmd": "stats"})

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        """linkem's answer to `command` as it gave it (a refusal too: {"ok": false})."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout)
                sock.connect(str(self.path))
                sock.sendall(json.dumps(command).encode() + b"\n")
                line = sock.makefile("rb").readline()
        except OSError as exc:
            raise LinkemControlError(f"linkem's control socket {self.path}: {exc}") from None
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            raise LinkemControlError(f"linkem answered {line[:200]!r}") from None
        if not isinstance(answer, dict):
            raise LinkemControlError(f"linkem answered {answer!r}")
        return answer
