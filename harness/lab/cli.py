"""`xfrbench lab up N` / `lab down` / `lab list`: a lab of sshd hosts on this machine."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness.lab.build import lab_down, lab_up, list_labs


def register(subparsers: Any) -> None:
    lab = subparsers.add_parser(
        "lab",
        help="a lab of 'remote' hosts on this machine (namespaces with their own sshd) and "
        "its Ansible inventory, for `run --inventory`",
    )
    sub = lab.add_subparsers(dest="lab_command", required=True, metavar="ACTION")
    up = sub.add_parser("up", help="build a primary and N secondaries; print the inventory")
    up.add_argument("count", type=int, metavar="N", help="how many secondaries (1-30)")
    up.add_argument(
        "--sites",
        default="near,far",
        help="the secondaries' sites, spread in order (default near,far: with N=3, "
        "ns1 ns2 near, ns3 far)",
    )
    up.add_argument(
        "--inventory", type=Path, help="write the inventory here too (removed by lab down)"
    )
    up.set_defaults(func=_up)
    down = sub.add_parser("down", help="remove a lab: sshds, namespaces, keys, folders")
    down.add_argument("lab_id", nargs="?", metavar="ID", help="the lab (default: the only one)")
    down.add_argument("--inventory", type=Path, help="the lab whose inventory this is")
    down.set_defaults(func=_down)
    listing = sub.add_parser("list", help="the labs up")
    listing.set_defaults(func=_list)


def _up(args: argparse.Namespace) -> int:
    sites = [s.strip() for s in str(args.sites).split(",") if s.strip()]
    lab = lab_up(args.count, sites, args.inventory)
    for host in lab.hosts:
        where = f" site {host.site}" if host.site else ""
        print(f"{host.name:5} {host.role:9} {host.address}{where}")
    print(f"lab {lab.lab_id} is up; inventory: {lab.inventory}")
    print(f"  xfrbench run --inventory {lab.inventory} SCENARIO")
    print(f"  xfrbench lab down {lab.lab_id}")
    return 0


def _down(args: argparse.Namespace) -> int:
    for line in lab_down(args.lab_id, args.inventory):
        print(line)
    return 0


def _list(args: argparse.Namespace) -> int:
    print(json.dumps(list_labs(), indent=2))
    return 0
