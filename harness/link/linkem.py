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
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from harness.core.errors import EnvironmentProblem
from harness.core.seeds import derive_seed
from harness.link.netem import gemodel_params, queue_packets, state_params
from harness.spec import DirectionSpec, LinkSpec, LossSpec

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BINARY = REPO / "target" / "release" / "linkem"  # the cargo workspace's target/
FIRST_QUEUE = 10  # NFQUEUE numbers from here on, one per emulated direction
READY_LINE = "linkem ready"
# How often linkem rewrites its stats file: a transfer's counters are at most this late.
STATS_INTERVAL_MS = 50
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
    name: str, direction: DirectionSpec, *, queue: int, rtt: float
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
    }


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
) -> dict[str, Any]:
    """linkem's config: (name, spec, NFQUEUE number) per emulated direction. `rtt` sizes
    the delay lines (the longest round trip they must cover); `seed` is the instance's
    (instance_seed: pass the case, or every case drops the same packets)."""
    return {
        "seed": seed,
        "stats_path": str(stats_path),
        "stats_interval_ms": stats_interval_ms,
        "directions": [
            direction_config(name, spec, queue=queue, rtt=rtt) for name, spec, queue in directions
        ],
    }


def read_stats(path: Path) -> dict[str, Any]:
    """linkem's last stats snapshot ({} before the first one is written)."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
