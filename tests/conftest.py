"""How the suite shares the machine when pytest-xdist runs it on several workers.

Tests run side by side, except those marked `alone` (pyproject.toml): a test whose assertion
is a duration, a timing relation or a CPU figure that a neighbour on the other core would
disturb. `make test` runs them in a pytest run of their own after the others; in any other
xdist run (`make test-fast`, `pytest -n 2 ...`) the lock below keeps them apart. Every test
holds a lock of the run while it runs, shared by the others and exclusive for an `alone`
one: an `alone` test starts once the test beside it has ended, and nothing starts beside it
until it ends. A turnstile in front of the lock lets a waiting `alone` test in before the
next shared one (flock(2) alone would let readers starve it). Without xdist, nothing is
locked.

Modules whose tests share a module fixture (a lab, a Prometheus, a server) or a fixed
resource (the test user, dockerd) carry an `xdist_group` mark, so that one worker runs them
(`--dist loadgroup`) and builds the fixture once."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ALONE = "alone"  # the marker (pyproject.toml)


def _lock_paths(config: pytest.Config) -> tuple[Path, Path] | None:
    """The run's two lock files, in the folder that holds its workers' temporary folders
    (xdist gives each worker `--basetemp <run's folder>/gwN`; pytest removes old ones)."""
    if not hasattr(config, "workerinput") or not config.option.basetemp:
        return None
    run = Path(config.option.basetemp).parent
    return run / "xfrbench-tests.turnstile", run / "xfrbench-tests.lock"


@contextlib.contextmanager
def _held(path: Path, mode: int) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def _turn(config: pytest.Config, alone: bool) -> Iterator[None]:
    paths = _lock_paths(config)
    if paths is None:
        yield
        return
    turnstile, lock = paths
    if alone:
        with _held(turnstile, fcntl.LOCK_EX), _held(lock, fcntl.LOCK_EX):
            yield
    else:
        with _held(turnstile, fcntl.LOCK_EX):
            pass  # waits behind an `alone` test that is waiting or running
        with _held(lock, fcntl.LOCK_SH):
            yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The test's setup, call and teardown (its module's fixtures included) under the lock."""
    with _turn(item.config, item.get_closest_marker(ALONE) is not None):
        yield
