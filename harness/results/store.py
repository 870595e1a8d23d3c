"""The run folder ``results/<run-id>/``: the durable record of a run.

- ``run.json``: a ``RunMeta`` (harness.results.meta): format version, run id, start (and
  end) time, whether the run was interrupted, the scenario, its hash, provenance... Always
  written to a temp file and renamed, so a reader sees the old or the new file, never half
  of one.
- ``transfers.jsonl``: one ``TransferRecord`` per line, appended and fsync'ed as each
  transfer finishes: a Ctrl-C or a crash loses at most the line being written, and
  ``harness.results.folder`` skips such a truncated last line when it reads the folder.
- ``summary.json`` / ``summary.csv``: written by ``finish()`` from transfers.jsonl.
- ``cases/<visit>/case.json`` (``cases/<visit>/<case>/case.json`` when a visit runs several
  cases): ``write_case_files``, one ``CaseMeta`` per case (``meta.case_meta`` builds it).

Results files are 0644 (harness.results.access); ``finish()`` hands a ``sudo`` run's folder
to the user who ran sudo, secrets excepted.
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from harness.core.errors import UserInputError
from harness.core.stats import PERCENTILE_METHOD
from harness.results.access import (
    RESULT_DIR_MODE,
    RESULT_FILE_MODE,
    hand_over,
    write_text_atomic,
)
from harness.results.catalog import catalog_summary
from harness.results.fleet import fleet_summary
from harness.results.folder import (
    CASE_JSON,
    RUN_JSON,
    SAMPLES,
    SUMMARY_CSV,
    SUMMARY_JSON,
    TRANSFERS,
    read_run,
)
from harness.results.meta import CaseMeta, RunMeta
from harness.results.model import FORMAT_VERSION, ResultFormatError, TransferRecord
from harness.results.resources import load_samples, summarize_resources
from harness.results.stream import stream_summary
from harness.results.summary import summarize, to_csv


def new_run_id(now: datetime.datetime | None = None) -> str:
    """UTC timestamp + 6 random hex digits: sorts by start time, unique across hosts."""
    now = now or datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _utc_text(now: datetime.datetime | None = None) -> str:
    return (now or datetime.datetime.now(datetime.UTC)).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` via a temp file in the same folder, fsync and rename (0644)."""
    text = json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"
    write_text_atomic(path, text)


def slug(name: str) -> str:
    """A case's name as a folder name."""
    return "".join(ch if ch.isalnum() or ch in "-_=." else "_" for ch in name)[:110]


def write_case_files(visit_dir: Path, metas: Sequence[CaseMeta]) -> list[Path]:
    """A case.json per case of a visit: in the visit's folder, or in a folder of its own
    per case when the visit runs several. Returns the files written."""
    written = []
    for meta in metas:
        folder = visit_dir if len(metas) == 1 else visit_dir / slug(meta.case)
        folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(folder / CASE_JSON, meta.to_json())
        written.append(folder / CASE_JSON)
    return written


def check_new_run_folder(root: Path, run_id: str | None = None, out: Path | None = None) -> Path:
    """The folder a run will write, if it may: a plain run id, and no other run's files
    there (a run never mixes into another run's files)."""
    if run_id is not None and ("/" in run_id or run_id in ("", ".", "..")):
        raise UserInputError(
            f"run id {run_id!r} is not a plain folder name",
            key="--run-id",
            fix="use letters, digits, '-' and '_', e.g. --run-id baseline-1",
        )
    folder = Path(out) if out is not None else Path(root) / (run_id or new_run_id())
    try:
        taken = folder.exists() and (not folder.is_dir() or any(folder.iterdir()))
    except OSError as exc:
        raise UserInputError(
            f"cannot look into result folder {folder}: {exc.strerror}",
            key="--out" if out is not None else "--results",
            fix="pick a folder you may write",
        ) from None
    if taken:
        raise UserInputError(
            f"result folder {folder} already exists and is not empty",
            key="--out" if out is not None else "--run-id",
            fix="pick another --out or run id, or remove the old run",
        )
    return folder


class RunStore:
    """Writer of one run folder. Use ``RunStore.create(...)`` and ``with``: leaving the
    block finishes the run (interrupted when it left by an exception, e.g. Ctrl-C)."""

    def __init__(self, folder: Path, run_id: str, meta: RunMeta) -> None:
        self.folder = folder
        self.run_id = run_id
        self.meta = meta
        fd = os.open(folder / TRANSFERS, os.O_WRONLY | os.O_CREAT | os.O_APPEND, RESULT_FILE_MODE)
        os.fchmod(fd, RESULT_FILE_MODE)  # the umask may have taken bits away
        self._lines: IO[str] | None = os.fdopen(fd, "a", encoding="utf-8")
        self.appended = 0
        self.finished = False
        # Called with each record once it is durable (the live Prometheus exporter).
        self.listeners: list[Callable[[TransferRecord], None]] = []

    @classmethod
    def create(
        cls,
        root: Path,
        run_id: str | None = None,
        out: Path | None = None,
        run_meta: RunMeta | Mapping[str, Any] | None = None,
    ) -> RunStore:
        """Make ``root/<run-id>/`` (or ``out``) and write its run.json.

        Refuses an existing non-empty folder: a run never mixes into another run's files.
        """
        run_id = run_id or new_run_id()
        folder = check_new_run_folder(root, run_id, out)
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(RESULT_DIR_MODE)  # whatever the umask: results are for everyone to read
        reserved = {"format_version", "run_id", "started", "finished"}
        reserved.add("interrupted")
        if isinstance(run_meta, RunMeta):
            given = run_meta.model_dump(mode="json", exclude=reserved)
        else:
            given = dict(run_meta or {})
            clash = sorted(reserved & set(given))
            if clash:
                raise ValueError(f"run_meta may not set {', '.join(clash)}")
        meta = RunMeta.from_json(
            given
            | {
                "format_version": FORMAT_VERSION,
                "run_id": run_id,
                "started": _utc_text(),
                "finished": None,
                "interrupted": None,
            },
            folder / RUN_JSON,
        )
        write_json_atomic(folder / RUN_JSON, meta.to_json())
        return cls(folder, run_id, meta)

    def append(self, record: TransferRecord) -> None:
        """Append one record and make it durable before returning."""
        if self._lines is None:
            raise RuntimeError("the run is finished; no more records")
        if record.run_id != self.run_id:
            raise ResultFormatError(
                f"record of run {record.run_id!r} appended to run {self.run_id!r}"
            )
        record.validate()
        self._lines.write(record.to_json() + "\n")
        self._lines.flush()
        os.fsync(self._lines.fileno())
        self.appended += 1
        for listener in self.listeners:
            listener(record)

    def finish(self, interrupted: bool = False) -> None:
        """Close transfers.jsonl, write the summaries and the final run.json; then, under
        sudo, hand the folder to the user (also when writing them failed)."""
        if self.finished:
            return
        try:
            if self._lines is not None:
                self._lines.close()
                self._lines = None
            _, records = read_run(self.folder)
            summaries = summarize(records)
            samples = load_samples(self.folder / SAMPLES)  # [] when none were taken
            write_json_atomic(
                self.folder / SUMMARY_JSON,
                {
                    "format_version": FORMAT_VERSION,
                    "run_id": self.run_id,
                    "interrupted": interrupted,
                    "percentiles": PERCENTILE_METHOD,  # p10, p90 and a fleet's p50, p95
                    "cases": [s.to_dict() for s in summaries],
                    "resources": summarize_resources(samples, records),
                    "fleet": fleet_summary(records, samples),
                    "stream": stream_summary(records),
                    "catalog": catalog_summary(records),
                },
            )
            write_text_atomic(self.folder / SUMMARY_CSV, to_csv(summaries))
            self.meta.finished = _utc_text()
            self.meta.interrupted = interrupted
            self.meta.transfers = len(records)
            write_json_atomic(self.folder / RUN_JSON, self.meta.to_json())
            self.finished = True
        finally:
            hand_over(self.folder)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.finish(interrupted=kind is not None)
