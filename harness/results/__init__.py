"""Versioned result model, atomic run store, summaries and provenance (see DESIGN.md,
"Results format")."""

from harness.results.access import hand_over
from harness.results.model import FORMAT_VERSION, ResultFormatError, TransferRecord
from harness.results.store import RunStore, load_run, new_run_id
from harness.results.summary import CaseSummary, summarize

__all__ = [
    "FORMAT_VERSION",
    "CaseSummary",
    "ResultFormatError",
    "RunStore",
    "TransferRecord",
    "hand_over",
    "load_run",
    "new_run_id",
    "summarize",
]
