"""A dialect's transfer_log_words keep every line its parse_log reads: the transfers parsed
from the lines that hold one of the words are those parsed from the whole log (the
fixtures are logs the servers wrote)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.servers import server_class

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NOISE = {
    "knot": "2026-11-28T18:01:47+0000 info: [m1.example.] loaded, serial none -> 1, 1286 "
    "bytes, expires in 1209599 seconds\n",
    "bind": "28-Nov-2026 18:01:47.000 general: info: zone m1.example/IN: loaded serial 1\n",
}


@pytest.mark.parametrize(
    "log",
    sorted(
        p.relative_to(FIXTURES)
        for pattern in ("*.log", "fallbacks/*.log")
        for p in FIXTURES.glob(pattern)
        if p.name.startswith(("bind", "knot"))
    ),
    ids=str,
)
def test_the_lines_kept_parse_to_the_same_transfers(log: Path) -> None:
    dialect = server_class(log.name.split("_")[0].split("-")[0])
    words = dialect.transfer_log_words
    assert words is not None
    text = (FIXTURES / log).read_text()
    whole = dialect.parse_log(text)
    assert whole, "a fixture without a transfer proves nothing"
    # Between every two lines, one of the lines a restarted consumer writes 100 k of.
    noisy = "".join(line + NOISE[dialect.kind] for line in text.splitlines(keepends=True))
    kept = [line for line in noisy.splitlines(keepends=True) if any(w in line for w in words)]
    assert dialect.parse_log("".join(kept)) == whole
    assert not any(NOISE[dialect.kind] == line for line in kept)
