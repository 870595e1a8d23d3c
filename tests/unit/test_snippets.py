"""Operators' configuration snippets ([servers.<role>] config): the settings read out of
each dialect's syntax, what the harness refuses (naming the line), the scenario keys, and
the checker's line numbers read back into the snippet's."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import spec
from harness.compare.meta import server_changes
from harness.core.errors import ScenarioError
from harness.results.meta import RunMeta
from harness.run.snippets import snippet_lines, snippet_uses
from harness.servers import DIALECTS
from harness.servers.snippet import (
    Setting,
    SnippetError,
    assignment_settings,
    braced_statements,
    clause_settings,
    yaml_sections,
    yaml_settings,
)

BIND_SNIPPET = """\
// an operator's tuning
transfer-format one-answer;   # trailing comment
rate-limit {
    responses-per-second 10;
};
/* a block
   comment */ max-records 100000;
check-names master "ignore";
"""


def test_bind_statements_are_read_at_the_top_level_only() -> None:
    assert braced_statements(BIND_SNIPPET) == [
        Setting(2, "", "transfer-format"),
        Setting(3, "", "rate-limit"),
        Setting(7, "", "max-records"),
        Setting(8, "", "check-names"),
    ]


@pytest.mark.parametrize("text", ["rate-limit { x 1;\n", "x 1; };\n"])
def test_bind_unbalanced_braces_are_refused(text: str) -> None:
    with pytest.raises(SnippetError, match="line"):
        braced_statements(text)


def test_knot_settings_go_under_their_section() -> None:
    text = "server:\n    tcp-workers: 2\n# note\ntemplate:\n  refresh-min-interval: 2\n"
    assert yaml_settings(text, ("server", "template")) == [
        Setting(2, "server", "tcp-workers"),
        Setting(5, "template", "refresh-min-interval"),
    ]
    assert yaml_sections(text, ("server", "template")) == {
        "server": "tcp-workers: 2",
        "template": "refresh-min-interval: 2",
    }


@pytest.mark.parametrize(
    ("text", "line"),
    [("tcp-workers: 2\n", 1), ("zone:\n  - domain: x.\n", 1), ("template:\n  - id: mine\n", 2)],
)
def test_knot_snippets_outside_its_sections_are_refused(text: str, line: int) -> None:
    with pytest.raises(SnippetError) as caught:
        yaml_settings(text, ("server", "template"))
    assert caught.value.line == line


def test_nsd_attributes_of_server_only() -> None:
    assert clause_settings("server:\n    tcp-count: 50\n", "server") == [
        Setting(2, "server", "tcp-count")
    ]
    assert clause_settings("tcp-count: 50\n", "server") == [Setting(1, "server", "tcp-count")]
    with pytest.raises(SnippetError, match="line 2: the zone: clause"):
        clause_settings("tcp-count: 50\nzone:\n  name: x.\n", "server")


def test_pdns_settings_are_assignments() -> None:
    assert assignment_settings("# mine\ndistributor-threads=2\n") == [
        Setting(2, "", "distributor-threads")
    ]
    with pytest.raises(SnippetError, match="line 1"):
        assignment_settings("distributor-threads 2\n")


@pytest.mark.parametrize(
    ("kind", "text", "line", "name"),
    [
        ("bind", "transfer-format one-answer;\nlisten-on { any; };\n", 2, "listen-on"),
        ("bind", 'zone "x." { type primary; };\n', 1, "zone"),
        ("bind", "logging { category default { null; }; };\n", 1, "logging"),
        ("knot", "server:\n    listen: 0.0.0.0@53\n", 2, "listen"),
        ("knot", "template:\n    storage: /tmp\n", 2, "storage"),
        ("nsd", "server:\n    tcp-count: 5\n    ip-address: 0.0.0.0\n", 3, "ip-address"),
        ("nsd", "verbosity: 0\n", 1, "verbosity"),
        ("pdns", "loglevel=3\n", 1, "loglevel"),
        ("pdns", "local-address=0.0.0.0\n", 1, "local-address"),
    ],
)
def test_what_the_harness_owns_is_refused_naming_the_line(
    kind: str, text: str, line: int, name: str
) -> None:
    with pytest.raises(SnippetError) as caught:
        DIALECTS[kind].check_snippet(text)
    assert caught.value.line == line
    assert f"{name!r} is set by xfrbench" in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("bind", "transfer-format one-answer;\n"),
        ("knot", "server:\n    tcp-workers: 2\ntemplate:\n    refresh-min-interval: 2\n"),
        ("nsd", "server:\n    tcp-count: 50\n"),
        ("pdns", "distributor-threads=2\n"),
    ],
)
def test_an_operators_tuning_passes(kind: str, text: str) -> None:
    DIALECTS[kind].check_snippet(text)


SCENARIO = """\
transports = ["tcp"]
xfr = ["axfr"]
[zones]
preset = "tiny"
[servers.primary]
kind = "bind"
config = "{primary}"
[servers.secondary]
kind = "knot"
{secondary}
"""


def _load(tmp_path: Path, primary: str, secondary: str = "") -> spec.LoadedScenario:
    path = tmp_path / "own.toml"
    path.write_text(SCENARIO.format(primary=primary, secondary=secondary))
    return spec.load(path)


def test_a_snippet_is_read_beside_the_scenario_with_its_hash(tmp_path: Path) -> None:
    (tmp_path / "named-extra.conf").write_text("transfer-format one-answer;\n")
    loaded = _load(tmp_path, "named-extra.conf")
    snippet = loaded.scenario.servers.primary.config
    assert snippet is not None and snippet.path == "named-extra.conf"
    assert snippet.text == "transfer-format one-answer;\n" and len(snippet.sha256) == 64
    (use,) = snippet_uses(loaded)
    assert use.key == "servers.primary.config" and use.role == "primary"
    assert use.to_json()["sha256"] == snippet.sha256
    # The text counts, not the path: an edited snippet is another scenario.
    before = loaded.spec_hash
    (tmp_path / "named-extra.conf").write_text("transfer-format many-answers;\n")
    assert _load(tmp_path, "named-extra.conf").spec_hash != before


def test_a_fleet_site_takes_the_secondarys_snippet(tmp_path: Path) -> None:
    (tmp_path / "p.conf").write_text("transfer-format one-answer;\n")
    (tmp_path / "k.conf").write_text("server:\n    tcp-workers: 2\n")
    sites = 'config = "k.conf"\n[[secondaries]]\nname = "near"\ncount = 2\n'
    loaded = _load(tmp_path, "p.conf", sites)
    (site,) = loaded.scenario.secondaries or []
    assert site.server.config is not None and "tcp-workers" in site.server.config.text
    assert [u.key for u in snippet_uses(loaded)] == [
        "servers.primary.config",
        "secondaries.near.config",
    ]


@pytest.mark.parametrize(
    ("files", "primary", "words"),
    [
        ({"bad.conf": "// mine\nlisten-on { any; };\n"}, "bad.conf",
         "bad.conf line 2: 'listen-on' is set by xfrbench"),
        ({}, "gone.conf", "cannot read the snippet"),
        ({"both.conf": "transfer-format one-answer;\n"}, "both.conf",
         "'transfer-format' is also in options"),
    ],
)  # fmt: skip
def test_bad_snippets_are_refused_with_file_line_and_fix(
    tmp_path: Path, files: dict[str, str], primary: str, words: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    path = tmp_path / "own.toml"
    text = SCENARIO.format(primary=primary, secondary="")
    if primary == "both.conf":
        text = text.replace('config = "both.conf"', 'config = "both.conf"\n'
                            'options = { transfer-format = "many-answers" }')  # fmt: skip
    path.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        spec.load(path)
    message = str(caught.value)
    assert str(path) in message and "servers.primary" in message and words in message
    assert "fix:" in message or "give a file" in message


def test_the_checkers_line_numbers_are_read_back_into_the_snippets() -> None:
    config = Path("/tmp/gone/named.conf")
    rendered = "options {\n    directory x;\n    // The operator's snippet (x):\n" \
        "    transfer-format one-answer;\n    transfer-formt x;\n};\n"  # fmt: skip
    snippet = "transfer-format one-answer;\ntransfer-formt x;\n"
    said = f"{config}:5: unknown option 'transfer-formt'\n{config}:2: other"
    assert snippet_lines(said, config, rendered, snippet) == (
        "named.conf:5 (snippet line 2): unknown option 'transfer-formt'\nnamed.conf:2: other"
    )


def test_runs_differing_only_in_a_snippets_text_compare_as_an_upgrade() -> None:
    scenario = {"name": "own", "servers": {"primary": {"kind": "bind", "config": "x.conf"}}}

    def meta(sha: str) -> RunMeta:
        use = {"key": "servers.primary.config", "kind": "bind", "path": "x.conf",
               "sha256": sha * 64, "text": "..."}  # fmt: skip
        return RunMeta(scenario=scenario, configs=[use])

    (change,) = server_changes(meta("a"), meta("b")) or []
    assert change.what == "servers.primary.config"
    assert (change.a, change.b) == (f"x.conf (sha256 {'a' * 12})", f"x.conf (sha256 {'b' * 12})")
    assert server_changes(meta("a"), meta("a")) is None
