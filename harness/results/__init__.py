"""The durable record of a run: the versioned record model, the run folder's one writer
(store) and one reader (folder), summaries, resources, fleet figures and provenance."""

from harness.results.access import hand_over
from harness.results.folder import RunFolder, open_run, read_run
from harness.results.model import FORMAT_VERSION, ResultFormatError, TransferRecord
from harness.results.store import RunStore, new_run_id
from harness.results.summary import CaseSummary, summarize

__all__ = [
    "FORMAT_VERSION",
    "CaseSummary",
    "ResultFormatError",
    "RunFolder",
    "RunStore",
    "TransferRecord",
    "hand_over",
    "new_run_id",
    "open_run",
    "read_run",
    "summarize",
]
