"""An operator's own configuration snippet (`[servers.<role>] config = "file"`): where each
dialect puts it, which of its settings the harness must own, and reading the setting names
out of it (pure).

The snippet is the operator's text, added verbatim to the generated configuration at one
documented place per dialect (BIND: inside `options { }`; Knot: its `server:` and the
default `template:`; NSD: its `server:` clause; PowerDNS: settings lines). The harness
refuses a snippet that sets what it must own itself (where the server listens, its keys,
zones, control channel and the logging it parses), naming the line; the server's own
checker judges the rest before the run (run/snippets.py).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """One setting a snippet makes: its line (1-based), section ("" where the dialect has
    one place) and name."""

    line: int
    section: str
    name: str


class SnippetError(ValueError):
    """A snippet that cannot go where its dialect puts it, at `line`."""

    def __init__(self, line: int, message: str, fix: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.fix = fix


_BIND_TOKEN = re.compile(
    r'(?P<comment>//[^\n]*|#[^\n]*|/\*.*?\*/)|(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<open>\{)|(?P<close>\})|(?P<end>;)|(?P<word>[^\s{};\"]+)",
    re.S,
)


def braced_statements(text: str) -> list[Setting]:
    """The statements of a named.conf fragment at its top level: the first word of each,
    nested blocks and comments skipped."""
    out: list[Setting] = []
    depth, expecting = 0, True
    for match in _BIND_TOKEN.finditer(text):
        kind = match.lastgroup
        line = text.count("\n", 0, match.start()) + 1
        if kind == "comment":
            continue
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth -= 1
            if depth < 0:
                raise SnippetError(
                    line,
                    "a '}' closes a block the snippet never opened",
                    "balance the snippet's braces",
                )
            expecting = depth == 0
        elif kind == "end":
            expecting = depth == 0
        elif expecting and depth == 0:
            out.append(Setting(line, "", match.group()))
            expecting = False
    if depth > 0:
        raise SnippetError(
            text.count("\n") + 1, "a block is left open", "close every '{' with '};'"
        )
    return out


def _lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines that are neither blank nor comments."""
    return [
        (number, line.rstrip())
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


def yaml_settings(text: str, sections: tuple[str, ...]) -> list[Setting]:
    """A Knot fragment's settings: `section:` headers at the margin (one of `sections`),
    `name: value` items indented beneath them."""
    out: list[Setting] = []
    section = None
    for number, line in _lines(text):
        if not line[0].isspace():
            name = line.rstrip(":").strip()
            if not line.endswith(":") or name not in sections:
                raise SnippetError(
                    number,
                    f"{line.strip()!r} is not a section header here",
                    f"start each part with one of: {', '.join(sections)}",
                )
            section = name
            continue
        item = line.strip()
        if section is None:
            raise SnippetError(
                number,
                "a setting before any section header",
                f"put it under one of: {', '.join(sections)}",
            )
        if item.startswith("- "):
            raise SnippetError(
                number,
                "a list item: the snippet's settings go into the "
                "harness's own server section and default template",
                "give plain `name: value` lines, no `- id:`",
            )
        if ":" in item and not item.startswith(("[", "]")):
            out.append(Setting(number, section, item.split(":", 1)[0].strip()))
    return out


def clause_settings(text: str, clause: str) -> list[Setting]:
    """An NSD fragment's `name: value` attributes of `clause:` (the header may be left out);
    any other clause is refused."""
    out: list[Setting] = []
    for number, line in _lines(text):
        name, _, value = line.strip().partition(":")
        if not line[0].isspace() and not value.strip():
            if name != clause:
                raise SnippetError(
                    number,
                    f"the {name}: clause is the harness's",
                    f"give only {clause}: attributes",
                )
            continue
        out.append(Setting(number, clause, name.strip()))
    return out


def assignment_settings(text: str) -> list[Setting]:
    """A PowerDNS fragment's `name=value` lines."""
    out: list[Setting] = []
    for number, line in _lines(text):
        name, equals, _ = line.partition("=")
        if not equals:
            raise SnippetError(
                number, f"{line.strip()!r} is not a setting", "write one `name=value` a line"
            )
        out.append(Setting(number, "", name.strip()))
    return out


def indented(text: str, spaces: int) -> str:
    """The snippet's lines indented by `spaces` more, for the place it goes."""
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else "" for line in text.splitlines())


def yaml_sections(text: str, sections: tuple[str, ...]) -> dict[str, str]:
    """A Knot fragment's lines under each section header, headers left out."""
    out: dict[str, list[str]] = {name: [] for name in sections}
    section = None
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue  # a comment at the margin would keep the rest from being re-indented
        if line.strip() and not line[0].isspace():
            section = line.rstrip().rstrip(":").strip()
            continue
        if section is not None:
            out[section].append(line)
    return {name: textwrap.dedent("\n".join(lines)) for name, lines in out.items()}


def refused(settings: list[Setting], owned: dict[str, str]) -> SnippetError | None:
    """The first setting the harness owns, as the error to raise; None when there is none.
    `owned`: name (or "section.name") -> why the harness sets it."""
    for setting in settings:
        for key in (f"{setting.section}.{setting.name}", setting.name):
            if key in owned:
                return SnippetError(
                    setting.line,
                    f"{setting.name!r} is set by xfrbench: {owned[key]}",
                    "remove it from the snippet",
                )
    return None
