"""Operators' configuration snippets judged by each server's own checker before any server
starts (named-checkconf, knotc conf-check, nsd-checkconf, pdns_server --config=check).

Each snippet is rendered into its dialect's configuration for a stand-in server (loopback
addresses, one zone, no secrets) in a temporary folder, removed afterwards; the checker's
words are the error, with its line numbers read back into the snippet's own.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserInputError
from harness.core.terms import Role
from harness.servers import server_class
from harness.servers.binaries import find_binary
from harness.servers.setup import ServerSetup, ZoneEntry
from harness.spec import LoadedScenario
from harness.spec.hosts import ConfigSnippet, ServerSpec

CHECK_TIMEOUT = 30.0
MARK = "The operator's snippet"  # the templates' comment just before a snippet


@dataclass(frozen=True)
class SnippetUse:
    key: str  # where the scenario sets it: servers.primary.config, secondaries.<site>.config
    role: Role
    server: ServerSpec
    snippet: ConfigSnippet

    def to_json(self) -> dict[str, str]:
        """run.json's record of it: where it was set, the file, its hash and its text."""
        return {"key": self.key, "kind": self.server.kind, **self.snippet.model_dump()}


def snippet_uses(loaded: LoadedScenario) -> list[SnippetUse]:
    """Each distinct (kind, role, snippet) the scenario's cases configure."""
    seen: dict[tuple[str, str, str], SnippetUse] = {}
    for case in loaded.cases:
        scenario = case.scenario
        servers: list[tuple[str, Role, ServerSpec]] = [
            ("servers.primary.config", "primary", scenario.servers.primary)
        ]
        if scenario.secondaries:
            servers += [(f"secondaries.{s.name}.config", "secondary", s.server)
                        for s in scenario.secondaries]  # fmt: skip
        else:
            servers.append(("servers.secondary.config", "secondary", scenario.servers.secondary))
        for key, role, server in servers:
            if server.config is not None:
                use = SnippetUse(key, role, server, server.config)
                seen.setdefault((server.kind, role, server.config.sha256), use)
    return list(seen.values())


def snippet_lines(checker_said: str, config: Path, rendered: str, snippet: str) -> str:
    """The checker's words with each line number of the rendered config that holds a line
    of the snippet followed by that line's number in the snippet (pure)."""
    lines = rendered.splitlines()
    own = [line.strip() for line in snippet.splitlines()]

    def mapped(match: re.Match[str]) -> str:
        number = int(match.group("n"))
        if not 1 <= number <= len(lines) or not any(MARK in x for x in lines[: number - 1]):
            return match.group()
        text = lines[number - 1].strip()
        if not text or text not in own:
            return match.group()
        return f"{match.group()} (snippet line {own.index(text) + 1})"

    pattern = rf"(?:{re.escape(str(config))}:|line )(?P<n>\d+)"
    # The rendered file is a stand-in in a folder already gone: its name is enough.
    return re.sub(pattern, mapped, checker_said).replace(str(config), config.name)


class NoChecker(UserInputError):
    """This host has no checker for a snippet's server (its servers run elsewhere)."""


def check_snippet(use: SnippetUse) -> str | None:
    """The checker's complaint about a snippet in place, or None when it passes. Raises
    NoChecker when this host has none, UserInputError when it cannot be run."""
    dialect = server_class(use.server.kind)
    binary = find_binary(use.server.kind, use.server.binary)
    if binary is None:
        raise NoChecker(
            f"cannot check the {use.server.kind} snippet {use.snippet.path}: no "
            f"{dialect.daemon} on this host",
            key=use.key,
            fix=f"install {dialect.packages[0]} here, or set servers.*.binary",
        )
    with tempfile.TemporaryDirectory(prefix="xfrbench-snippet-") as folder:
        workdir = Path(folder)
        setup = ServerSetup(
            role=use.role,
            address="127.0.0.1",
            peers=("127.0.0.2",),
            zones=[ZoneEntry("check.invalid.", workdir / "check.zone")],
            workdir=workdir,
            options=dict(use.server.options),
            config=use.snippet.text,
            control_socket=workdir / "control.sock",
        )
        server = dialect(setup, binary)
        server.render()
        argv = server.check_config_argv()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=CHECK_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UserInputError(
                f"cannot run {argv[0]} to check {use.snippet.path}: {exc}", key=use.key
            ) from None
        if done.returncode == 0:
            return None
        said = "\n".join(
            line for line in (done.stdout + done.stderr).splitlines() if "Loading '" not in line
        ).strip()
        return snippet_lines(said, server.config, server.config.read_text(), use.snippet.text)


def check_snippets(loaded: LoadedScenario, *, local: bool) -> list[str]:
    """Every snippet of the scenario through its server's checker; the first refused is
    an error in the checker's own words (exit 2). `local`: the servers run on this host
    (netns), so their checkers must be here too; elsewhere (compose, an inventory) a
    missing checker is a warning, returned, and the server judges the snippet as it starts."""
    warnings = []
    for use in snippet_uses(loaded):
        try:
            said = check_snippet(use)
        except NoChecker as missing:
            if local:
                raise
            warnings.append(f"{missing.problem}: the server will judge it when it starts")
            continue
        if said is not None:
            raise UserInputError(
                f"{server_class(use.server.kind).daemon}'s checker refused the snippet "
                f"{use.snippet.path}: {said}",
                file=loaded.path,
                key=use.key,
                fix=f"mend the snippet ({use.server.kind} puts it "
                f"{server_class(use.server.kind).snippet_place})",
            )
    return warnings
