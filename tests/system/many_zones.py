"""Helpers for system tests and benches: a scratch namespace and Knot serving many zones.

Shared by tests/system/test_poll_zones.py and bench/poll. Everything made here is removed by
the exact name or pid it was created with; nothing is cleaned up by pattern.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.zonegen import ZoneFile, ZoneSpec, generate

ADDRESS = "127.0.0.1"
_counter = itertools.count()


@contextmanager
def scratch_netns(label: str) -> Iterator[str]:
    """A namespace of our own with loopback up, deleted by its name afterwards."""
    name = f"xfb{label}-{os.getpid()}-{next(_counter)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True)


def hosting_zones(count: int, serial: int = 1, origin: str = "hosting.example.") -> list[ZoneFile]:
    """``count`` small hosting zones (cached by harness.zonegen)."""
    spec = ZoneSpec(preset="hosting", records=12, origin=origin, zones=count, serial=serial)
    return list(generate(spec).files)


@dataclass
class Knot:
    netns: str
    folder: Path
    port: int
    zones: list[str]  # origins, in configuration order
    proc: subprocess.Popen[bytes] | None = None

    @property
    def config(self) -> Path:
        return self.folder / "knot.conf"

    def zone_path(self, origin: str) -> Path:
        return self.folder / "zones" / f"{origin}zone"

    def start(self) -> None:
        log = (self.folder / "stdout.log").open("wb")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, "knotd", "-c", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def install(self, files: Sequence[ZoneFile]) -> None:
        """Copy zone files into place (copies: the cache's files are shared, never edited);
        each by rename, so the server never reads half a file."""
        for item in files:
            target = self.zone_path(item.origin)
            tmp = target.with_suffix(".tmp")
            shutil.copyfile(item.path, tmp)
            os.replace(tmp, target)

    def reload(self, origins: Sequence[str]) -> None:
        """Re-read these zones' files now (knotc zone-reload), in batches of 500 names."""
        for start in range(0, len(origins), 500):
            subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    self.netns,
                    "knotc",
                    "-c",
                    str(self.config),
                    "-t",
                    "60",
                    "zone-reload",
                    *origins[start : start + 500],
                ],
                check=True,
                capture_output=True,
            )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # `ip netns exec` execs knotd: the pid is knotd's own.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self) -> str:
        path = self.folder / "knot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def cpu_seconds(self) -> float:
        """User + system CPU of knotd so far (for the bench)."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def prepare_knot(
    netns: str, folder: Path, files: Sequence[ZoneFile], *, port: int = 53, workers: int = 2
) -> Knot:
    """Write a primary's config for these zones (not started: call ``start``)."""
    (folder / "zones").mkdir(parents=True, exist_ok=True)
    (folder / "db").mkdir(exist_ok=True)
    knot = Knot(netns, folder, port, [item.origin for item in files])
    knot.install(files)
    zones = "".join(f"  - domain: {item.origin}\n" for item in files)
    knot.config.write_text(
        "server:\n"
        f'    rundir: "{folder}"\n'
        f'    pidfile: "{folder}/knot.pid"\n'
        f"    listen: {ADDRESS}@{port}\n"
        f"    udp-workers: {workers}\n"
        f"    background-workers: {workers}\n"
        "log:\n"
        f'  - target: "{folder}/knot.log"\n'
        "    any: info\n"
        "database:\n"
        f'    storage: "{folder}/db"\n'
        "control:\n"
        f'    listen: "{folder}/knot.sock"\n'
        "template:\n"
        "  - id: default\n"
        f'    storage: "{folder}/zones"\n'
        '    file: "%s.zone"\n'
        "    zonefile-sync: -1\n"
        "    zonefile-load: whole\n"
        "    journal-content: none\n"
        "    semantic-checks: off\n"
        "zone:\n" + zones
    )
    return knot
