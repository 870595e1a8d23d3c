"""A sudo run's folder as its user sees it: `report` and `compare` run as a real normal user
(runuser) on root-owned folders, and a handed-over folder whose secrets stay root's."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.metrics.openmetrics import write_openmetrics
from harness.results import RunStore
from harness.xfr.secrets import write_private
from tests.system.normal_user import REPO, as_user, ensure_user

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files and switch user"),
    # The test user is created on first use (useradd): its tests on one worker.
    pytest.mark.xdist_group("normal-user"),
]

RUN = REPO / "tests" / "fixtures" / "runs" / "20250101T000000Z-abc123"


@pytest.fixture(scope="module")
def user() -> pwd.struct_passwd:
    return ensure_user()


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder the normal user can reach (pytest's tmp_path is root's 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="xfb-access-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def _root_only(folder: Path, *names: str) -> None:
    """Files as an old `sudo xfrbench run` left them: root's, 0600."""
    for name in names:
        (folder / name).chmod(0o600)


@pytest.mark.parametrize("locked", ["run.json", "transfers.jsonl", "samples.jsonl"])
def test_report_and_compare_of_root_only_files_say_which_and_how(
    user: pwd.struct_passwd, shared: Path, locked: str
) -> None:
    run = Path(shutil.copytree(RUN, shared / "run"))
    other = Path(shutil.copytree(RUN, shared / "other"))
    _root_only(run, locked)
    commands = [("report", str(run))]
    if locked != "samples.jsonl":  # compare reads run.json and transfers.jsonl only
        commands.append(("compare", str(other), str(run)))
    for argv in commands:
        result = as_user(user, *argv)
        assert result.returncode == 2, (argv, result.stderr)
        assert "Traceback" not in result.stderr
        assert f"{run / locked}: cannot read it: permission denied (owner root, mode 0600)" in (
            result.stderr
        )
        assert f"sudo chown -R $(id -un): {run}" in result.stderr


def test_report_of_a_root_only_folder(user: pwd.struct_passwd, shared: Path) -> None:
    run = Path(shutil.copytree(RUN, shared / "run"))
    _root_only(run, "run.json", "transfers.jsonl", "samples.jsonl")
    run.chmod(0o700)
    result = as_user(user, "report", str(run))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{run / 'run.json'}: cannot read it: permission denied" in result.stderr


def test_a_sudo_run_is_handed_over_but_its_secrets_are_not(
    user: pwd.struct_passwd, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUDO_UID", str(user.pw_uid))
    monkeypatch.setenv("SUDO_GID", str(user.pw_gid))
    zone_cache = shared / "cache.db"
    zone_cache.write_text("zone")
    source = shutil.copytree(RUN, shared / "src")
    # Ctrl-C in the middle of a run: the store still finishes and hands over.
    with pytest.raises(KeyboardInterrupt), RunStore.create(shared, "run") as store:
        case = store.folder / "cases" / "000-bind-bind-tcp-tsig-axfr"
        key = write_private(case / "tls" / "server.key", "PRIVATE KEY")
        config = write_private(case / "primary" / "named.conf", 'key "k" { secret "s"; };')
        log = case / "primary" / "named.log"
        log.write_text("zone example/IN: loaded serial 1\n")
        os.link(zone_cache, case / "primary" / "example.db")
        shutil.copyfile(source / "samples.jsonl", store.folder / "samples.jsonl")
        raise KeyboardInterrupt
    write_openmetrics(store.folder)  # what the runner writes after the store finishes

    ours = (user.pw_uid, user.pw_gid)
    for path in (store.folder, case, case / "tls", log, *store.folder.glob("*.*")):
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == ours, path
    for secret in (key, config):
        info = secret.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600), secret
    assert zone_cache.stat().st_uid == 0  # a hard link keeps the cache's owner

    result = as_user(user, "report", str(store.folder))
    assert result.returncode == 0, result.stderr
    assert (store.folder / "report.html").stat().st_uid == user.pw_uid
    peek = subprocess.run(
        ["runuser", "-u", user.pw_name, "--", "cat", str(key)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert peek.returncode != 0 and "Permission denied" in peek.stderr
