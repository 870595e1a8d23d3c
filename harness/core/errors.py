"""One exception hierarchy for the harness.

Every error a user can cause says what is wrong, where (file and key path) and how to fix
it; the CLI prints the message and exits with status 2, never with a traceback.
"""

from __future__ import annotations

from pathlib import Path


class XfrbenchError(Exception):
    """Base of every error the harness raises on purpose."""

    exit_status = 1


class UserInputError(XfrbenchError):
    """Bad input from the user: a scenario, a flag, a path. Exit status 2."""

    exit_status = 2

    def __init__(
        self,
        problem: str,
        *,
        file: str | Path | None = None,
        key: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.problem = problem
        self.file = str(file) if file is not None else None
        self.key = key
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        where = ": ".join(part for part in (self.file, self.key) if part)
        text = f"{where}: {self.problem}" if where else self.problem
        if self.fix:
            text += f"; {self.fix}"
        return text


class ScenarioError(UserInputError):
    """A scenario file that does not parse or does not validate."""


class EnvironmentProblem(XfrbenchError):
    """The host lacks something a run needs (root, a kernel feature, a server binary)."""

    exit_status = 3


class ToolFailed(XfrbenchError):
    """An external tool (a checker, a signer, ip, tc) failed; the message carries its stderr."""

    def __init__(self, argv: list[str], returncode: int, stderr: str) -> None:
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr
        tail = stderr.strip().splitlines()[-5:]
        super().__init__(f"{argv[0]} exited with {returncode}: " + " | ".join(tail))
