"""tests/conftest.py's lock under pytest-xdist: a test marked `alone` runs with no other test
beside it, while the others do run side by side. A small suite run on two workers with this
repository's conftest; each test notes when it ran."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

SUITE = """
import json, os, time
from pathlib import Path

import pytest

LOG = Path(os.environ["ALONE_LOG"])


def _note(name):
    start = time.monotonic()
    time.sleep(0.4)
    with LOG.open("a") as out:
        out.write(json.dumps([name, start, time.monotonic()]) + "\\n")


@pytest.mark.parametrize("n", range(6))
def test_shared(n):
    _note(f"shared{n}")


@pytest.mark.alone
@pytest.mark.parametrize("n", range(2))
def test_alone(n):
    _note(f"alone{n}")
"""


def _overlap(a: list, b: list) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def test_an_alone_test_has_no_neighbour_and_the_others_run_side_by_side(tmp_path: Path) -> None:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    alone: no neighbour\n")
    (tmp_path / "test_suite.py").write_text(SUITE)
    log = tmp_path / "ran.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
         "--basetemp", str(tmp_path / "base"), "test_suite.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"ALONE_LOG": str(log), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    ran = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(ran) == 8
    alone = [r for r in ran if r[0].startswith("alone")]
    shared = [r for r in ran if r[0].startswith("shared")]
    for mine in alone:
        assert not [r[0] for r in ran if r is not mine and _overlap(mine, r)], mine
    # Two workers: the shared tests did run side by side (so the check above can fail).
    assert any(_overlap(a, b) for i, a in enumerate(shared) for b in shared[i + 1 :])
