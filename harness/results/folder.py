"""Reading a run folder back: the one reader report, compare and the OpenMetrics export use.

    run = open_run(Path("results/20261125T155349Z-598021"))
    run.meta, run.records, run.summary, run.cases, run.samples

``open_run`` is for commands that only read (report, compare): a folder that is missing, not
a run folder, unreadable or damaged is the user's input error (exit 2), naming the file.
``read_run`` is the store's own re-read at the end of a run: a damaged line there is a
``ResultFormatError``. Records of every format version load (``TransferRecord.from_dict``
upgrades older ones); a truncated LAST line of transfers.jsonl, a writer killed in the
middle of it, is skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import UserInputError
from harness.results.access import read_bytes, read_text, unreadable
from harness.results.meta import CaseMeta, RunMeta
from harness.results.model import FORMAT_VERSION, ResultFormatError, TransferRecord
from harness.results.resources import Sample, load_samples

RUN_JSON = "run.json"
TRANSFERS = "transfers.jsonl"
SUMMARY_JSON = "summary.json"
SUMMARY_CSV = "summary.csv"
SAMPLES = "samples.jsonl"  # written by harness.observe.sampler while the run goes on
CASE_JSON = "case.json"  # one per case, under cases/<visit>/ (or cases/<visit>/<case>/)
# Views of the files above, written beside them (harness.metrics, harness.report).
METRICS_OM = "metrics.om"
REPORT_HTML = "report.html"


def read_run(path: Path) -> tuple[RunMeta, list[TransferRecord]]:
    """(run.json, records) of a run folder; ResultFormatError for a damaged file."""
    folder = Path(path)
    run_json = folder / RUN_JSON
    try:
        data = json.loads(read_text(run_json, folder))
    except FileNotFoundError:
        raise UserInputError(f"{folder} is not a run folder (no {RUN_JSON})") from None
    except json.JSONDecodeError as exc:
        raise ResultFormatError(f"{run_json}: {exc}") from None
    if not isinstance(data, dict):
        raise ResultFormatError(f"{run_json}: not a JSON object")
    version = data.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ResultFormatError(
            f"{run_json}: format_version {version!r}; this harness reads up to {FORMAT_VERSION}"
        )
    meta = RunMeta.from_json(data, run_json)
    return meta, read_records(folder)


def read_records(folder: Path) -> list[TransferRecord]:
    """transfers.jsonl of a run folder ([] when it has none yet)."""
    transfers = folder / TRANSFERS
    records: list[TransferRecord] = []
    try:
        raw = read_bytes(transfers, folder)
    except FileNotFoundError:
        return records
    lines = raw.split(b"\n")
    complete_end = len(lines) - 1  # the part after the last newline is unfinished
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last = number - 1 >= complete_end
        try:
            records.append(TransferRecord.from_json(line.decode("utf-8")))
        except (ResultFormatError, UnicodeDecodeError) as exc:
            if last:
                break  # a killed writer's half line
            raise ResultFormatError(f"{transfers}:{number}: {exc}") from None
    return records


@dataclass
class RunFolder:
    """A run folder as the readers see it."""

    path: Path
    meta: RunMeta
    records: list[TransferRecord]
    summary: dict[str, Any] | None = None  # summary.json; None for a run that never finished
    cases: list[CaseMeta] = field(default_factory=list)
    samples: list[Sample] | None = None  # samples.jsonl; None when the run took no samples

    @property
    def case_metas(self) -> dict[str, CaseMeta]:
        return {meta.case: meta for meta in self.cases}


def open_run(path: Path) -> RunFolder:
    """Everything a reader needs of a run folder; UserInputError (exit 2) when it is not
    one, or is damaged."""
    folder = check_run_dir(path)
    try:
        meta, records = read_run(folder)
    except ResultFormatError as exc:
        raise UserInputError(str(exc), file=folder) from None
    summary_path = folder / SUMMARY_JSON
    summary = _read_json(summary_path, folder) if _exists(summary_path, folder) else None
    cases = []
    for case_json in sorted(folder.glob(f"cases/**/{CASE_JSON}")):
        try:
            cases.append(CaseMeta.from_json(_read_json(case_json, folder), case_json))
        except ResultFormatError as exc:
            raise UserInputError(
                str(exc), fix="the case.json is damaged; re-run the scenario"
            ) from None
    samples = None
    if _exists(folder / SAMPLES, folder):
        try:
            samples = load_samples(folder / SAMPLES)
        except OSError as exc:
            raise unreadable(folder / SAMPLES, exc, folder) from None
    summary = summary if isinstance(summary, dict) else None
    return RunFolder(folder, meta, records, summary, cases, samples)


def check_run_dir(run_dir: Path) -> Path:
    """The folder, if it is a run folder; else a UserInputError that says what to give."""
    folder = Path(run_dir)
    if not _exists(folder, folder):
        raise UserInputError(
            f"{folder} does not exist", fix="give a run folder such as results/<run-id>"
        )
    if not folder.is_dir():
        raise UserInputError(
            f"{folder} is not a folder", fix="give a run folder such as results/<run-id>"
        )
    run_json = folder / RUN_JSON
    if not _exists(run_json, folder):
        raise UserInputError(
            f"{folder} is not a run folder (no {RUN_JSON})",
            fix="give a folder written by `xfrbench run`, such as results/<run-id>",
        )
    if not run_json.is_file():
        raise unreadable(run_json, IsADirectoryError(), folder)
    return folder


def _read_json(path: Path, run_dir: Path) -> Any:
    try:
        return json.loads(read_text(path, run_dir))
    except json.JSONDecodeError as exc:
        raise UserInputError(
            f"not valid JSON: {exc}",
            file=path,
            fix=f"the file is damaged; remove it or re-run the scenario ({run_dir})",
        ) from None


def _exists(path: Path, run_dir: Path) -> bool:
    """Whether `path` is there; a file that is there but cannot be looked at is an error."""
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise unreadable(path, exc, run_dir) from None
    return True
