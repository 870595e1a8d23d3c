"""Each dialect's words for an IXFR that became an AXFR, and the transfers a stream's
secondary made, read from lines captured from real runs (tests/fixtures/fallbacks/)."""

from __future__ import annotations

from pathlib import Path

from harness.servers import Bind

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fallbacks"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_bind_secondary_drops_a_transfer_that_failed_after_some_messages() -> None:
    # A transfer cut by the primary ends with "Transfer status: end of file" and then
    # "Transfer completed: 3 messages, 1755 records, ... (serial 12)": not a transfer.
    taken = [
        e for e in Bind.parse_log(text("bind-secondary-end-of-file.log")) if e.direction == "in"
    ]
    assert [e.serial for e in taken] == [1, 2]
