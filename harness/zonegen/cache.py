"""The zone cache: one folder per spec, built under a temporary name and renamed into place.

A folder without ``meta.json`` is never used, and ``meta.json`` is the last thing written
before the atomic rename, so an interrupted generation leaves at worst a ``.tmp-*`` folder
(removed on the next run once its process is gone), never a zone that looks complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ENV_VAR = "XFRBENCH_ZONE_CACHE"
META = "meta.json"
_TMP_PREFIX = ".tmp-"


def cache_root(cache_dir: Path | None = None) -> Path:
    if cache_dir is not None:
        root = Path(cache_dir)
    elif os.environ.get(ENV_VAR):
        root = Path(os.environ[ENV_VAR])
    else:
        root = Path(__file__).resolve().parents[2] / "zones" / "cache"
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        # Keeps generated zones out of git even where the repo's .gitignore does not list them.
        ignore.write_text("*\n")
    return root


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(root: Path) -> None:
    """Remove temporary folders left by generations whose process died."""
    for entry in root.glob(f"{_TMP_PREFIX}*"):
        try:
            pid = int(entry.name.rsplit("-", 2)[-2])
        except (ValueError, IndexError):
            continue
        if not _pid_alive(pid):
            shutil.rmtree(entry, ignore_errors=True)


def read_meta(entry: Path) -> dict[str, Any] | None:
    """The entry's metadata if it is complete and its files are intact, else None."""
    try:
        meta = json.loads((entry / META).read_text())
    except (OSError, ValueError):
        return None
    for item in meta.get("files", []):
        path = entry / item["file"]
        try:
            if path.stat().st_size != item["bytes"]:
                return None  # someone wrote into a hard-linked copy: do not trust it
        except OSError:
            return None
    return meta


@contextlib.contextmanager
def building(root: Path, key: str) -> Iterator[Path]:
    """Yield an empty temporary folder; on success it becomes ``root/key`` atomically."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{key}-{os.getpid()}-", dir=root))
    try:
        yield tmp
        final = root / key
        try:
            os.rename(tmp, final)
        except OSError:
            # Someone else finished the same entry first (or a broken one is in the way).
            if read_meta(final) is None:
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_meta(folder: Path, meta: dict[str, Any]) -> None:
    (folder / META).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


def link_or_copy(src: Path, dst: Path) -> None:
    """Place src at dst atomically: hardlink when on the same filesystem, else copy."""
    tmp = dst.parent / f".{dst.name}.tmp-{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)
