"""`xfrbench run` as a normal user: a usage error (exit 2) that says how to go on, and
--dry-run makes its checks without root."""

from __future__ import annotations

import os
import pwd

import pytest

from harness.servers.binaries import find_binary
from tests.system.normal_user import REPO, as_user, ensure_user

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch user"),
    # The test user is created on first use (useradd): its tests on one worker.
    pytest.mark.xdist_group("normal-user"),
]

QUICK = REPO / "scenarios" / "quick.toml"


@pytest.fixture(scope="module")
def user() -> pwd.struct_passwd:
    return ensure_user()


def test_run_without_root_is_a_usage_error(user: pwd.struct_passwd) -> None:
    if find_binary("bind") is None:
        pytest.skip("no BIND on this host: the binary check comes first")
    result = as_user(user, "run", str(QUICK), "--results", "/nonexistent/results")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "xfrbench run needs root" in result.stderr
    assert f"run it with sudo, or check it without root: xfrbench run --dry-run {QUICK}" in (
        result.stderr
    )


def test_dry_run_needs_no_root(user: pwd.struct_passwd) -> None:
    if find_binary("bind") is None:
        pytest.skip("no BIND on this host")
    result = as_user(user, "run", "--dry-run", str(QUICK))
    assert result.returncode == 0, result.stderr
    assert "16 cases" in result.stdout and "servers: bind " in result.stdout
