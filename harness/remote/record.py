"""A remote run's record in the controller's testbed registry, and what `xfrbench clean`
does with it once the run's driver is dead.

    record_run(registry, inventory, run_id, work, logs)   # before any host is touched
    clean_inventory(path)            # teardown.yml for the dead runs on this inventory
    forget_run("r1")                 # drop a record whose hosts are gone for good

The record holds the inventory as the run resolved it (every host's connection variables,
address, folder and interpreter), not only its path: teardown.yml reaches the run's hosts
from the record when the inventory file is gone (a temporary one, a lab's), so a run is
cleaned as long as its hosts answer. A record is dropped without touching its hosts only
when they are known to be gone (the lab they were in was taken down, which stopped
everything in it), or when the operator says so (`clean --forget RUN`): a host that does
not answer may be down for a while, with the run's servers still on it, so an unreachable
host never drops a record by itself; clean says what is left where on every call.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

import yaml

from harness.core.errors import UserInputError
from harness.inventory import Inventory, InventoryHost, load_inventory
from harness.lab import lab_holding
from harness.remote.playbooks import PlaybookResult, close_masters, run_playbook
from harness.testbed import registry as reg

KIND = "remote_run"


def remote_run_dir(host: InventoryHost, run_id: str) -> str:
    return f"{host.root}/{run_id}"


def record_run(
    registry: reg.Registry, inventory: Inventory, run_id: str, work: Path, logs: Path
) -> None:
    """What `clean` needs to tear the run down without its driver (or its inventory file):
    the inventory resolved, each host's folder of the run, the controller's folders, and
    the lab the hosts are in (named by the inventory, or found by their addresses)."""
    addresses = [h.address for h in inventory.hosts]
    registry.add(
        KIND,
        inventory=str(inventory.path.resolve()),
        run=run_id,
        hosts={h.name: remote_run_dir(h, run_id) for h in inventory.hosts},
        addresses={h.name: h.address for h in inventory.hosts},
        resolved=inventory.to_ansible(),
        work=str(work),
        logs=str(logs),
        lab=inventory.lab or lab_holding(addresses),
    )


def left_on_hosts(detail: dict[str, Any]) -> str:
    """ "ns0 (192.0.2.10) /var/tmp/xfrbench/r1, ..." (pure)."""
    addresses = detail.get("addresses") or {}
    return ", ".join(
        f"{host} ({addresses[host]}) {folder}" if host in addresses else f"{host} {folder}"
        for host, folder in sorted(detail.get("hosts", {}).items())
    )


def teardown(inventory: Inventory, run_id: str, work: Path, log_dir: Path) -> PlaybookResult:
    """teardown.yml for one run on every host of the inventory (its recorded folders)."""
    result = run_playbook(
        "teardown", inventory, {"xfrbench_run": run_id}, log_dir,
        control_dir=work / "cp", check=False,
    )  # fmt: skip
    close_masters(work / "cp")
    return result


def remove_work(work: Path) -> None:
    """A run's folder on the controller (its ssh sockets, playbook variables), and the
    folder of all runs' when this was the last one in it."""
    shutil.rmtree(work, ignore_errors=True)
    with contextlib.suppress(OSError):  # not empty: another run's
        work.parent.rmdir()


def _inventory_of(detail: dict[str, Any], work: Path) -> Inventory | None:
    """The run's inventory file while it is there, else the one recorded (written into the
    run's folder on the controller), else None (a record older than the resolved copy)."""
    path = Path(detail["inventory"])
    if path.is_file():
        return load_inventory(path)
    if not detail.get("resolved"):
        return None
    work.mkdir(mode=0o700, parents=True, exist_ok=True)
    copy = work / "inventory.yml"
    copy.write_text(yaml.safe_dump(detail["resolved"], sort_keys=False))
    return load_inventory(copy)


def _undo_remote_run(action: reg.Action) -> str:
    detail = action.detail
    run, work = detail["run"], Path(detail["work"])
    lab = detail.get("lab")
    if lab and not (reg.registry_dir() / f"{lab}.json").exists():
        # `lab down` stopped whatever ran in the lab's namespaces and removed its roots.
        remove_work(work)
        return f"remote run {run}: its lab {lab} is gone, and its hosts with it"
    inventory = _inventory_of(detail, work)
    forget = f"once they are gone for good, `xfrbench clean --forget {run}` drops this record"
    if inventory is None:
        return (
            f"!inventory {detail['inventory']} is gone; left on {left_on_hosts(detail)}; " + forget
        )
    result = teardown(inventory, run, work, Path(detail.get("logs") or work / "logs"))
    problems = [f"{host}: {what}: {message}" for host, what, message in result.problems()]
    if problems:
        missing = "" if Path(detail["inventory"]).is_file() else "its inventory is gone; "
        return (
            f"!remote run {run} is still on {left_on_hosts(detail)}: teardown.yml: "
            + "; ".join(" ".join(p.split()) for p in problems)
            + f"; {missing}{forget}"
        )
    remove_work(work)
    return f"remote run {run} on {left_on_hosts(detail)} ({result.wall_s:.1f} s)"


reg.register_undo(KIND, lambda item: str(item["run"]), _undo_remote_run)


def _runs(registries: list[reg.Registry]) -> list[tuple[reg.Registry, dict[str, Any]]]:
    return [(r, i) for r in registries for i in r.items if i.get("kind") == KIND]


def clean_inventory(path: Path) -> tuple[list[str], list[str]]:
    """What killed runs left on the hosts of this inventory (their registries name it),
    removed by teardown.yml; live runs are left alone. Returns (done, problems)."""
    load_inventory(path)  # refuse an unreadable inventory before touching anything
    wanted = str(Path(path).resolve())
    registries, unreadable = reg.load_all()
    done: list[str] = []
    problems: list[str] = list(unreadable)
    for registry, item in _runs(registries):
        if item.get("inventory") != wanted:
            continue
        if registry.driver_alive():
            problems.append(f"run {item['run']} is still running; left alone")
            continue
        undone, notes, failed = reg.undo(registry, registries)
        done += undone
        problems += failed + [n for n in notes if failed]
    return done, problems


def forget_run(run: str) -> tuple[list[str], list[str]]:
    """Drop the record of a dead remote run (by run id, or its registry's id) without
    touching its hosts: what else it lists on the controller is removed as `clean` would.
    Returns (done, problems) as clean_inventory, the hosts' leftovers named first."""
    registries, _ = reg.load_all()
    found = [(r, i) for r, i in _runs(registries) if run in (i.get("run"), r.testbed_id)]
    recorded = ", ".join(f"{i['run']} ({r.testbed_id})" for r, i in _runs(registries))
    if len(found) != 1:
        raise UserInputError(
            f"{'no' if not found else 'more than one'} remote run {run!r} is recorded "
            f"(recorded: {recorded or 'none'})",
            key="--forget",
            fix="give a run id, or a registry id from the list when run ids repeat",
        )
    ((registry, item),) = found
    if registry.driver_alive():
        raise UserInputError(
            f"remote run {item['run']} is still running",
            key="--forget",
            fix="stop it (Ctrl-C), then `xfrbench clean`: its teardown removes it from its hosts",
        )
    registry.discard(item)
    done, notes, problems = reg.undo(registry, registries)
    remove_work(Path(item["work"]))
    forgotten = (
        f"record of remote run {item['run']}; left on its hosts (xfrbench will not reach "
        f"them again): {left_on_hosts(item)}"
    )
    return [forgotten, *done], problems + [n for n in notes if problems]
