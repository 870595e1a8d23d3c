"""The compose suite: images built locally, per-run projects brought up and down for real.

Needs root, Docker (`apt-get install docker.io docker-compose`; dockerd is started when none
answers) and debootstrap. The first run builds the Debian base and the images the tests use
(cached by tag afterwards); the time of each step is printed at the end of the session.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from harness.compose import daemon, images

# The images the suite runs: Debian 13's servers have XoT both ways in BIND and Knot.
SERVER_VARIANT = "trixie"
LINK_SUITE = "trixie"
_STEPS: list[images.Step] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "compose: needs Docker and builds/uses compose images")


@pytest.fixture(scope="session")
def compose_images() -> Iterator[dict[str, str]]:
    """service -> image tag, built (or found cached) once per session. A dockerd this
    session started is stopped at its end (the images stay cached on disk)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (dockerd, debootstrap, namespaces)")
    missing = [tool for tool in ("docker", "dockerd", "debootstrap") if not _which(tool)]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} missing: apt-get install docker.io docker-compose debootstrap"
        )
    if not images.LINKEM_BINARY.is_file():
        pytest.skip(f"{images.LINKEM_BINARY} missing: run `make linkem`")
    ours_before = daemon.started_dockerd()
    plan = images.ImagePlan(servers=(SERVER_VARIANT,), link_suite=LINK_SUITE)
    try:
        _STEPS.extend(images.build_images(plan))
        server = images.server_tag(SERVER_VARIANT)
        yield {"primary": server, "secondary": server, "link": images.link_tag(LINK_SUITE)}
    finally:
        if ours_before is None and daemon.started_dockerd() is not None:
            daemon.stop_dockerd()


def _which(tool: str) -> bool:
    return bool(shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin"))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _STEPS:
        terminalreporter.section("compose images")
        for step in _STEPS:
            terminalreporter.write_line(step.describe())
