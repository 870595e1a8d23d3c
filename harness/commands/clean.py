"""`xfrbench clean`: remove what killed runs left behind (and only that).

Every host provider's undo kinds must be known here: importing the compose provider
registers its own (compose projects, attached namespace names) with the testbed registry.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import harness.compose.provider  # registers the compose undo kinds
import harness.lab  # noqa: F401 - registers the lab's undo kinds (a lab whose sshd died)
from harness.core.errors import EnvironmentProblem
from harness.remote.fleet import clean_inventory  # also registers the remote run's undo kind
from harness.testbed import clean_leftovers, find_strays


def register(subparsers: Any) -> None:
    clean = subparsers.add_parser(
        "clean",
        help="remove namespaces, processes, rules, sysctl changes and compose projects left "
        "by killed runs",
        description="Reads the testbed registries under /run/xfrbench/testbeds and undoes "
        "exactly what they list for drivers that are no longer running. Nothing "
        "is matched by name pattern; live runs are left alone.",
    )
    clean.add_argument("--json", action="store_true", help="machine-readable output")
    clean.add_argument(
        "--inventory",
        type=Path,
        metavar="FILE",
        help="only what killed runs left on this inventory's hosts (teardown.yml: their "
        "recorded servers and run folders)",
    )
    clean.set_defaults(func=handle_clean)


def handle_clean(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        raise EnvironmentProblem("`xfrbench clean` needs root (namespaces, iptables, sysctl)")

    problems: list[str] = []
    if args.inventory is not None:
        removed, problems = clean_inventory(args.inventory)
        strays: list[str] = []
    else:
        removed = clean_leftovers(problems=problems)
        strays = find_strays()
    if args.json:
        print(
            json.dumps(
                {"removed": removed, "problems": problems, "unlisted_namespaces": strays}, indent=2
            )
        )
    else:
        for line in removed:
            print(f"removed {line}")
        for line in problems:
            print(f"problem: {line}")
        for name in strays:
            print(
                f"note: namespace {name} is named like ours but no registry lists it; "
                f"left alone (remove it with `ip netns delete {name}` if it is yours)"
            )
        if not removed and not problems:
            print("nothing to clean")
    return 1 if problems else 0
