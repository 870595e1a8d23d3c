"""Who may read a run folder: results for everyone, secrets for their owner only.

- Results files (run.json, transfers.jsonl, summaries, samples, metrics.om, report.html)
  are written 0644 whatever the umask; secrets (TSIG keys, TLS keys, configs that embed a
  secret: harness.xfr.secrets.write_private) are 0600. A file that grants nothing to group and
  others is taken for a secret.
- `hand_over(run_dir)`: a `sudo xfrbench run` leaves its folder to the user who ran sudo,
  so that `report` and `compare` work without sudo; the secrets stay root's 0600.
- `read_bytes` / `read_text`: a file that cannot be read is a UserInputError naming the
  file and the fix, never a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import stat
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import UserInputError

log = logging.getLogger(__name__)

RESULT_FILE_MODE = 0o644
RESULT_DIR_MODE = 0o755  # the run folder itself
# The run folder's own results files: readable by everyone even under a umask of 077.
RESULT_FILES = (
    "run.json",
    "transfers.jsonl",
    "summary.json",
    "summary.csv",
    "samples.jsonl",
    "metrics.om",
    "report.html",
)


# --- pure ---------------------------------------------------------------------------------


def sudo_owner(env: Mapping[str, str], euid: int) -> tuple[int, int] | None:
    """(uid, gid) of the user who ran `sudo`, or None when not run by root through sudo."""
    if euid != 0:
        return None
    uid, gid = env.get("SUDO_UID", ""), env.get("SUDO_GID", "")
    if not (uid.isdigit() and gid.isdigit()) or int(uid) == 0:
        return None
    return int(uid), int(gid)


def is_secret(mode: int) -> bool:
    """A regular file no one but its owner may read or write (harness.xfr.secrets writes 0600)."""
    return stat.S_ISREG(mode) and not mode & 0o077


@dataclass(frozen=True)
class Entry:
    path: Path
    mode: int
    links: int  # st_nlink


@dataclass
class HandOverPlan:
    chown: list[Path] = field(default_factory=list)
    secrets: list[Path] = field(default_factory=list)  # stay root's
    shared: list[Path] = field(default_factory=list)  # hard-linked: owner kept


def plan_hand_over(entries: Iterable[Entry]) -> HandOverPlan:
    """Which entries of a run folder change owner: all but secrets, and but files with
    other hard links (a zone file linked from the zone cache: chowning it would hand over
    the cache's copy too, so it keeps its owner and is only made readable)."""
    plan = HandOverPlan()
    for entry in entries:
        if is_secret(entry.mode):
            plan.secrets.append(entry.path)
        elif stat.S_ISREG(entry.mode) and entry.links > 1:
            plan.shared.append(entry.path)
        else:
            plan.chown.append(entry.path)
    return plan


# --- thin I/O -----------------------------------------------------------------------------


def _walk(run_dir: Path) -> list[Entry]:
    entries = []
    for root, dirs, files in os.walk(run_dir):  # does not follow links to folders
        for name in [*dirs, *files]:
            path = Path(root, name)
            with contextlib.suppress(FileNotFoundError):
                info = path.lstat()
                entries.append(Entry(path, info.st_mode, info.st_nlink))
    return entries


@dataclass(frozen=True)
class HandOver:
    uid: int
    gid: int
    handed: int
    secrets: list[Path]
    problems: list[str]


def hand_over(run_dir: Path, env: Mapping[str, str] | None = None) -> HandOver | None:
    """Give the run folder to the user who ran `sudo` (SUDO_UID/SUDO_GID, euid 0), except
    its secrets, which stay root's 0600; results files are made 0644 first. None when not
    run through sudo. Never raises for a file it cannot change: it logs and goes on, since
    a run's results must not be lost to a chown."""
    owner = sudo_owner(os.environ if env is None else env, os.geteuid())
    folder = Path(run_dir)
    if owner is None or not folder.is_dir():
        return None
    uid, gid = owner
    problems: list[str] = []
    for name in RESULT_FILES:
        path = folder / name
        if path.is_file() and not path.is_symlink():
            try:
                path.chmod(RESULT_FILE_MODE)
            except OSError as exc:
                problems.append(f"{path}: {exc.strerror}")
    top = folder.lstat()
    plan = plan_hand_over([Entry(folder, top.st_mode, top.st_nlink), *_walk(folder)])
    for path in plan.chown:
        try:
            os.chown(path, uid, gid, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror}")
    for problem in problems:
        log.warning("handing %s over to uid %d: %s", folder, uid, problem)
    return HandOver(uid, gid, len(plan.chown), plan.secrets, problems)


def write_text_atomic(path: Path, text: str) -> None:
    """Write a results file via a temp file in the same folder, fsync and rename: mode 0644
    and, when root writes into a folder that belongs to someone else (a run handed over),
    that folder's owner, so the file reads like the rest of the run."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, RESULT_FILE_MODE)
        folder = os.stat(path.parent)
        if os.geteuid() == 0 and folder.st_uid != 0:
            os.fchown(fd, folder.st_uid, folder.st_gid)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _owner(path: Path) -> str:
    try:
        info = path.stat()
    except OSError:
        return ""
    try:
        name = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        name = str(info.st_uid)
    return f" (owner {name}, mode {stat.S_IMODE(info.st_mode):04o})"


def unreadable(path: Path, exc: OSError, run_dir: Path | None = None) -> UserInputError:
    """The error for a run-folder file that cannot be read, with the fix for its cause."""
    folder = run_dir if run_dir is not None else path.parent
    if isinstance(exc, PermissionError):
        return UserInputError(
            f"cannot read it: permission denied{_owner(path)}",
            file=path,
            fix=f"a run made with sudo before runs were handed over is root's: take it with "
            f"`sudo chown -R $(id -un): {folder}`, or run this command with sudo",
        )
    if isinstance(exc, IsADirectoryError):
        return UserInputError(
            "is a folder where a file should be",
            file=path,
            fix=f"{folder} is damaged or not a run folder; give a folder written by `xfrbench run`",
        )
    return UserInputError(
        f"cannot read it: {exc.strerror or exc}",
        file=path,
        fix=f"check the file, or give another run folder than {folder}",
    )


def read_bytes(path: Path, run_dir: Path | None = None) -> bytes:
    """The file's bytes; FileNotFoundError passes through (a caller may expect it), any
    other failure to read is the UserInputError of `unreadable`."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise unreadable(Path(path), exc, run_dir) from None


def read_text(path: Path, run_dir: Path | None = None) -> str:
    """The file as UTF-8 text; bytes that are not UTF-8 are an error naming the file."""
    raw = read_bytes(path, run_dir)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserInputError(
            f"not UTF-8 text (byte {exc.start})",
            file=path,
            fix="the file is damaged; re-run the scenario or restore the file",
        ) from None


def cannot_use(exc: OSError) -> UserInputError:
    """Any file the report or compare could not read or write, said as a user error: the
    known files are checked on their own (harness.results.access); this catches the rest."""
    name = Path(exc.filename) if exc.filename else None
    return UserInputError(
        f"cannot use it: {exc.strerror or exc}",
        file=name,
        fix="check that you may read the run folder (a run made with sudo before runs were "
        "handed over is root's: `sudo chown -R $(id -un): RUN_DIR`), or run with sudo",
    )
