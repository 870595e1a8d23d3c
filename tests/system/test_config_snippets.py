"""Operators' configuration snippets on real servers: each server's own checker judges a
snippet before any server starts (its words on failure, exit 2), a good snippet of each
dialect passes it, and a BIND snippet visibly changes a transfer (one record a message)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import spec
from harness.core.errors import UserInputError
from harness.core.terms import SERVER_TO_SERVER
from harness.results.folder import read_run
from harness.run.snippets import check_snippets

pytestmark = pytest.mark.servers

SCENARIO = """\
transports = ["tcp"]
xfr = ["axfr"]
[zones]
preset = "tiny"
[servers.primary]
kind = "{kind}"
config = "mine.conf"
"""

GOOD = {
    "bind": "transfer-format one-answer;\nmax-records 1000000;\n",
    "knot": "server:\n    tcp-workers: 2\ntemplate:\n    refresh-min-interval: 2\n",
    "nsd": "server:\n    tcp-count: 50\n",
    "pdns": "distributor-threads=2\n",
}
TYPO = {  # one wrong name each, and the checker's own words for it
    "bind": ("transfer-format one-answer;\ntransfer-formt one-answer;\n",
             "named.conf:", "(snippet line 2): unknown option 'transfer-formt'"),
    "knot": ("server:\n    tcp-workerss: 2\n", "knot.conf",
             "(snippet line 2), item 'tcp-workerss'"),
    "nsd": ("server:\n    tcp-count: 50\n    tcp-countt: 50\n", "nsd.conf:",
            "(snippet line 3): at 'tcp-countt:': error: syntax error"),
    "pdns": ("distributor-threadz=2\n", "", "unknown setting 'distributor-threadz'"),
}  # fmt: skip


def _scenario(tmp_path: Path, kind: str, snippet: str) -> Path:
    (tmp_path / "mine.conf").write_text(snippet)
    path = tmp_path / f"{kind}.toml"
    path.write_text(SCENARIO.format(kind=kind))
    return path


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_a_good_snippet_passes_its_servers_checker(kind: str, tmp_path: Path) -> None:
    assert check_snippets(spec.load(_scenario(tmp_path, kind, GOOD[kind])), local=True) == []


@pytest.mark.parametrize("kind", sorted(TYPO))
def test_a_bad_snippet_is_refused_in_its_checkers_words(kind: str, tmp_path: Path) -> None:
    snippet, where, words = TYPO[kind]
    path = _scenario(tmp_path, kind, snippet)
    with pytest.raises(UserInputError) as caught:
        check_snippets(spec.load(path), local=True)
    message = str(caught.value)
    assert str(path) in message and "servers.primary.config" in message
    assert where in message and words in message, message
    assert "mend the snippet" in message
    assert not list(Path("/tmp").glob(f"xfrbench-snippet-*/{kind}*")), "stand-in left behind"


def test_the_command_exits_2_before_any_server_starts(tmp_path: Path) -> None:
    path = _scenario(tmp_path, "bind", TYPO["bind"][0])
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--dry-run", str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unknown option 'transfer-formt'" in done.stderr


AB = """\
repeats = 2
timeout = "60s"
transports = ["tcp"]
xfr = ["axfr"]
[zones]
preset = "tld"
records = 3000
origin = "snippet.example."
seed = 1
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[matrix]
"servers.primary.config" = ["many.conf", "one.conf"]
"""


@pytest.mark.root
@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces")
def test_a_bind_snippet_changes_the_messages_of_a_transfer(tmp_path: Path) -> None:
    """Both snippets in one run, interleaved on one testbed (the primary reconfigured
    between them): one-answer sends a message a record, many-answers packs them."""
    (tmp_path / "many.conf").write_text("transfer-format many-answers;\n")
    (tmp_path / "one.conf").write_text("// the operator's\ntransfer-format one-answer;\n")
    path = tmp_path / "ab.toml"
    path.write_text(AB)
    from harness.run.runner import run_scenario

    run_dir = run_scenario(spec.load(path), results_root=tmp_path / "results")
    meta, records = read_run(run_dir)
    transfers = [r for r in records if r.method == SERVER_TO_SERVER]
    assert transfers and all(r.ok and r.verified for r in transfers), [r.error for r in transfers]
    messages = {}
    for record in transfers:
        assert record.messages is not None and record.records is not None
        messages.setdefault(record.case.split("/")[1], []).append(record.messages / record.records)
    assert set(messages) == {"config=many.conf", "config=one.conf"}
    assert min(messages["config=one.conf"]) > 0.9  # a message a record
    assert max(messages["config=many.conf"]) < 0.1
    # run.json keeps each snippet's text and hash.
    assert {(c["path"], c["text"].strip().splitlines()[-1]) for c in meta.configs or []} == {
        ("many.conf", "transfer-format many-answers;"),
        ("one.conf", "transfer-format one-answer;"),
    }
    for case_dir in (run_dir / "cases").iterdir():
        for conf in case_dir.rglob("named.conf"):
            assert conf.stat().st_mode & 0o077 == 0
