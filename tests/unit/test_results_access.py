"""Modes of results files, the hand-over plan, and unreadable run files as exit-2 errors
(no root needed; tests/system/test_results_access.py runs the CLI as a normal user)."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import main
from harness.metrics.openmetrics import write_openmetrics
from harness.results import RunStore
from harness.results.access import (
    Entry,
    hand_over,
    is_secret,
    plan_hand_over,
    sudo_owner,
)
from harness.xfr.secrets import write_private

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RUN = "20250101T000000Z-abc123"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def strict_umask() -> Iterator[None]:
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def test_sudo_owner() -> None:
    env = {"SUDO_UID": "1000", "SUDO_GID": "1001"}
    assert sudo_owner(env, 0) == (1000, 1001)
    assert sudo_owner(env, 1000) is None  # not root: nothing to hand over
    assert sudo_owner({}, 0) is None  # root itself, no sudo
    assert sudo_owner({"SUDO_UID": "0", "SUDO_GID": "0"}, 0) is None  # sudo from root
    assert sudo_owner({"SUDO_UID": "1000"}, 0) is None
    assert sudo_owner({"SUDO_UID": "x", "SUDO_GID": "1"}, 0) is None


def test_results_are_0644_and_the_folder_0755_whatever_the_umask(
    tmp_path: Path, strict_umask: None
) -> None:
    with RunStore.create(tmp_path, "r1", run_meta={"scenario": {"name": "s"}}) as store:
        pass
    write_openmetrics(store.folder)
    assert mode(store.folder) == 0o755
    names = ["run.json", "transfers.jsonl", "summary.json", "summary.csv", "metrics.om"]
    assert {name: mode(store.folder / name) for name in names} == dict.fromkeys(names, 0o644)
    # A secret written beside them keeps its own mode.
    key = write_private(store.folder / "cases" / "c" / "tls" / "server.key", "k")
    assert mode(key) == 0o600 and is_secret(key.stat().st_mode)
    assert not is_secret((store.folder / "run.json").stat().st_mode)
    assert not is_secret(store.folder.stat().st_mode)  # folders are never secrets


def test_plan_keeps_secrets_and_shared_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    case = run / "cases" / "000-c"
    case.mkdir(parents=True)
    key = write_private(case / "tls" / "server.key", "secret")
    config = write_private(case / "named.conf", "key { secret };")
    log = case / "named.log"
    log.write_text("log")
    log.chmod(0o644)
    cached = tmp_path / "zone-cache.db"  # outside the run, as the zone cache is
    cached.write_text("zone")
    os.link(cached, case / "example.db")
    (case / "latest").symlink_to(log)
    entries = []
    for root, dirs, files in os.walk(run):
        for name in [*dirs, *files]:
            info = Path(root, name).lstat()
            entries.append(Entry(Path(root, name), info.st_mode, info.st_nlink))
    plan = plan_hand_over(entries)
    assert sorted(plan.secrets) == sorted([key, config])
    assert plan.shared == [case / "example.db"]
    assert set(plan.chown) == {
        run / "cases",
        case,
        case / "tls",
        log,
        case / "latest",
    }


def test_no_hand_over_without_sudo(tmp_path: Path) -> None:
    with RunStore.create(tmp_path, "r1") as store:
        pass
    owner = store.folder.stat().st_uid
    assert hand_over(store.folder, env={}) is None
    assert store.folder.stat().st_uid == owner


def _run_copy(tmp_path: Path, name: str = "run") -> Path:
    return Path(shutil.copytree(RUNS / RUN, tmp_path / name))


def _damage(folder: Path, how: str) -> Path:
    """Damage one file of a run folder; returns the file the error must name."""
    if how == "transfers-is-a-folder":
        target = folder / "transfers.jsonl"
        target.unlink()
        target.mkdir()
    elif how == "run-json-is-a-folder":
        target = folder / "run.json"
        target.unlink()
        target.mkdir()
    elif how == "run-json-not-utf8":
        target = folder / "run.json"
        target.write_bytes(b'{"format_version": 1, "x": "\xff"}')
    elif how == "summary-bad-json":
        target = folder / "summary.json"
        target.write_text('{"cases": [')
    elif how == "samples-is-a-folder":
        target = folder / "samples.jsonl"
        target.unlink()
        target.mkdir()
    elif how == "case-json-bad":
        target = folder / "cases" / "000-c" / "case.json"
        target.parent.mkdir(parents=True)
        target.write_text("not json")
    else:
        raise AssertionError(how)
    return target


DAMAGE = {
    "transfers-is-a-folder": "is a folder where a file should be",
    "run-json-is-a-folder": "is a folder where a file should be",
    "run-json-not-utf8": "not UTF-8 text",
    "summary-bad-json": "not valid JSON",
    "samples-is-a-folder": "is a folder where a file should be",
    "case-json-bad": "not valid JSON",
}


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_report_and_compare_on_a_damaged_run_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    good = _run_copy(tmp_path, "good")
    bad = _run_copy(tmp_path, "bad")
    target = _damage(bad, how)
    commands = [["report", str(bad)]]
    if how.startswith(("run-json", "transfers")):  # compare reads these two only
        commands.append(["compare", str(good), str(bad)])
    for argv in commands:
        assert main(argv) == 2, argv
        err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
        assert str(target) in err and DAMAGE[how] in err, err
        assert "Traceback" not in err


def test_report_into_a_folder_named_like_the_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _run_copy(tmp_path)
    (folder / "report.html").mkdir()
    assert main(["report", str(folder)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{folder / 'report.html'}: --out: cannot write the report" in err
    assert "not a folder" in err


def test_a_results_file_written_by_root_into_a_handed_over_folder_takes_its_owner(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file away")
    from harness.results.access import write_text_atomic

    folder = tmp_path / "handed"
    folder.mkdir()
    os.chown(folder, 4321, 4322)
    write_text_atomic(folder / "metrics.om", "# EOF\n")
    info = (folder / "metrics.om").stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o644)
