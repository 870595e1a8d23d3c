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
from harness.remote.record import clean_inventory, forget_run  # registers remote_run's undo
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
    clean.add_argument(
        "--forget",
        metavar="RUN",
        help="drop the record of the dead remote run RUN without touching its hosts, once "
        "they are gone for good (clean names what it left on which host). A run whose "
        "inventory file is gone is still torn down from its record while its hosts answer, "
        "and one whose lab was taken down is forgotten by itself; a host that does not "
        "answer may only be down for a while, so that never drops a record",
    )
    clean.set_defaults(func=handle_clean)


def handle_clean(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        raise EnvironmentProblem("`xfrbench clean` needs root (namespaces, iptables, sysctl)")

    problems: list[str] = []
    strays: list[str] = []
    if args.forget is not None:
        removed, problems = forget_run(args.forget)
    elif args.inventory is not None:
        removed, problems = clean_inventory(args.inventory)
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
