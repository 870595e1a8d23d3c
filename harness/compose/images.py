"""The compose backend's images, built locally: no registry is needed or used.

    xfrbench/debian:<suite>          debootstrap --variant=minbase + `docker import` (cached)
    xfrbench/server:<variant>        the four DNS servers of one Debian release (Dockerfile.server)
    xfrbench/link:<suite>            the router: iproute2, iptables, linkem (Dockerfile.link)
    xfrbench/prometheus:<suite>      Debian's Prometheus scraping the driver
    xfrbench/driver:bookworm         xfrbench itself (Python 3.11 is Debian 12's)

Server variants: `bookworm` (BIND 9.18, Knot 3.2, NSD 4.6, PowerDNS 4.7), `bookworm-backports`
(BIND 9.20 from backports, the rest as bookworm) and `trixie` (BIND 9.20, Knot 3.4, NSD 4.12,
PowerDNS 4.9).

    python -m harness.compose.images --servers trixie --link-suite trixie
    python -m harness.compose.images --all
    python -m harness.compose.images --stop-dockerd
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.compose import daemon
from harness.core.errors import EnvironmentProblem, ToolFailed, UserInputError

REPO = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO / "servers" / "docker"
LINKEM_BINARY = REPO / "target" / "release" / "linkem"  # the cargo workspace's target/

SUITES = ("bookworm", "trixie")
# Bumped whenever base_files() changes, so a cached base from older code is rebuilt.
BASE_FORMAT = "1"
BASE_LABEL = "io.xfrbench.base-format"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
DRIVER_SUITE = "bookworm"  # the lock file pins Python 3.11


@dataclass(frozen=True)
class ServerVariant:
    name: str
    suite: str
    backports: tuple[str, ...] = ()


SERVER_VARIANTS: dict[str, ServerVariant] = {
    "bookworm": ServerVariant("bookworm", "bookworm"),
    "bookworm-backports": ServerVariant("bookworm-backports", "bookworm", ("bind9", "bind9-utils")),
    "trixie": ServerVariant("trixie", "trixie"),
}


def base_tag(suite: str) -> str:
    return f"xfrbench/debian:{suite}"


def server_tag(variant: str) -> str:
    return f"xfrbench/server:{variant}"


def link_tag(suite: str) -> str:
    return f"xfrbench/link:{suite}"


def prometheus_tag(suite: str) -> str:
    return f"xfrbench/prometheus:{suite}"


def driver_tag() -> str:
    return f"xfrbench/driver:{DRIVER_SUITE}"


def check_suite(suite: str, key: str = "suite") -> str:
    if suite not in SUITES:
        raise UserInputError(
            f"unknown Debian suite {suite!r}", key=key, fix=f"use one of {', '.join(SUITES)}"
        )
    return suite


def check_variant(name: str, key: str = "servers") -> ServerVariant:
    try:
        return SERVER_VARIANTS[name]
    except KeyError:
        raise UserInputError(
            f"unknown server image variant {name!r}",
            key=key,
            fix=f"use one of {', '.join(SERVER_VARIANTS)}",
        ) from None


# --- the base image (pure part) -------------------------------------------------------------


def apt_sources(suite: str, mirror: str, security_mirror: str) -> str:
    """One-line sources: the release, its updates, security and backports (pinned low by apt)."""
    return (
        f"deb {mirror} {suite} main\n"
        f"deb {mirror} {suite}-updates main\n"
        f"deb {security_mirror} {suite}-security main\n"
        f"deb {mirror} {suite}-backports main\n"
    )


def base_files(suite: str, mirror: str, security_mirror: str) -> dict[str, tuple[str, int]]:
    """Files written into the debootstrapped tree before import: path -> (text, mode)."""
    return {
        "etc/apt/sources.list": (apt_sources(suite, mirror, security_mirror), 0o644),
        # Package scripts must not start daemons during a build: the driver starts servers.
        "usr/sbin/policy-rc.d": ("#!/bin/sh\nexit 101\n", 0o755),
        "etc/apt/apt.conf.d/90xfrbench": (
            'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n'
            'Acquire::Languages "none";\n',
            0o644,
        ),
        # Smaller layers, faster builds: no manuals or translations in a benchmark image.
        "etc/dpkg/dpkg.cfg.d/90xfrbench-nodoc": (
            "path-exclude=/usr/share/doc/*\npath-include=/usr/share/doc/*/copyright\n"
            "path-exclude=/usr/share/man/*\npath-exclude=/usr/share/info/*\n"
            "path-exclude=/usr/share/locale/*\n",
            0o644,
        ),
    }


def import_changes(suite: str) -> list[str]:
    """Dockerfile instructions `docker import --change` applies to the base."""
    return [
        "ENV DEBIAN_FRONTEND=noninteractive",
        f"LABEL {BASE_LABEL}={BASE_FORMAT} io.xfrbench.suite={suite}",
        'CMD ["/bin/bash"]',
    ]


# --- building -------------------------------------------------------------------------------


@dataclass
class Step:
    """One image made (or found cached), and how long it took."""

    tag: str
    seconds: float
    cached: bool
    detail: str = ""

    def describe(self) -> str:
        what = self.detail or ("cached" if self.cached else "built")
        return f"{self.tag}: {what} ({self.seconds:.1f} s)"


def image_labels(tag: str) -> dict[str, str] | None:
    """The image's labels, or None when no image has that tag."""
    result = daemon.docker(
        "image", "inspect", "--format", "{{json .Config.Labels}}", tag, check=False
    )
    if result.returncode != 0:
        return None
    labels = json.loads(result.stdout.strip() or "null")
    return dict(labels) if isinstance(labels, dict) else {}


def image_id(tag: str) -> str | None:
    result = daemon.docker("image", "inspect", "--format", "{{.Id}}", tag, check=False)
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None


def image_exists(tag: str) -> bool:
    return image_labels(tag) is not None


def ensure_base(
    suite: str,
    *,
    mirror: str | None = None,
    security_mirror: str | None = None,
    rebuild: bool = False,
    workdir: Path | None = None,
) -> Step:
    """xfrbench/debian:<suite> from debootstrap, unless an image of this format exists."""
    check_suite(suite)
    tag = base_tag(suite)
    began = time.monotonic()
    labels = image_labels(tag)
    if labels is not None and labels.get(BASE_LABEL) == BASE_FORMAT and not rebuild:
        return Step(tag, time.monotonic() - began, cached=True)
    debootstrap = shutil.which("debootstrap") or shutil.which("debootstrap", path="/usr/sbin:/sbin")
    if debootstrap is None:
        raise EnvironmentProblem(
            "debootstrap is missing; install it with `apt-get install debootstrap`"
        )
    mirror = mirror or os.environ.get("XFRBENCH_DEBIAN_MIRROR", DEFAULT_MIRROR)
    security_mirror = security_mirror or os.environ.get(
        "XFRBENCH_DEBIAN_SECURITY_MIRROR", DEFAULT_SECURITY_MIRROR
    )
    # /var/tmp: a root file system is too big for a tmpfs /tmp on some hosts.
    top = Path(tempfile.mkdtemp(prefix=f"xfrbench-base-{suite}-", dir=workdir or "/var/tmp"))
    root = top / "root"
    try:
        result = subprocess.run(
            [debootstrap, "--variant=minbase", suite, str(root), mirror],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if result.returncode != 0:
            log = root / "debootstrap" / "debootstrap.log"
            tail = log.read_text(errors="replace") if log.exists() else result.stderr
            raise ToolFailed(["debootstrap", suite], result.returncode, tail)
        for relative, (text, mode) in base_files(suite, mirror, security_mirror).items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(mode)
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (root / leftover).glob("*"):
                if entry.is_file():
                    entry.unlink()
        _import(root, tag, suite)
    finally:
        _remove_tree(top)
    return Step(tag, time.monotonic() - began, cached=False, detail="debootstrapped and imported")


def _import(root: Path, tag: str, suite: str) -> None:
    """tar the tree straight into `docker import` (no archive on disk)."""
    changes = [arg for change in import_changes(suite) for arg in ("--change", change)]
    with tempfile.TemporaryFile() as tar_err:
        tar = subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(root), "-c", "."],
            stdout=subprocess.PIPE,
            stderr=tar_err,
        )
        assert tar.stdout is not None
        try:
            imported = subprocess.run(
                ["docker", "import", *changes, "--message", f"debootstrap {suite}", "-", tag],
                stdin=tar.stdout,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
        finally:
            tar.stdout.close()
            tar_status = tar.wait(60)
        if tar_status != 0:
            tar_err.seek(0)
            stderr = tar_err.read().decode(errors="replace")
            raise ToolFailed(["tar", "-c", str(root)], tar_status, stderr)
    if imported.returncode != 0:
        raise ToolFailed(["docker", "import", tag], imported.returncode, imported.stderr)


def _remove_tree(top: Path) -> None:
    """rm -rf a debootstrap tree, unmounting first what a failed debootstrap left mounted."""
    prefix = str(top.resolve()) + "/"
    mounts = [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(prefix)
    ]
    for mountpoint in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mountpoint], capture_output=True, check=False)
    shutil.rmtree(top, ignore_errors=True)


def build_image(
    tag: str,
    dockerfile: str,
    *,
    build_args: dict[str, str] | None = None,
    files: dict[str, Path] | None = None,
    trees: dict[str, Path] | None = None,
) -> Step:
    """`docker build` in a staged context: the Dockerfile plus exactly `files` and `trees`.

    Staging keeps the context small (no .venv, no cargo target) and the layer cache exact.
    Builds use the host network: the daemon needs no NAT or iptables rules for apt.
    """
    began = time.monotonic()
    previous = image_id(tag)
    with tempfile.TemporaryDirectory(prefix="xfrbench-build-", dir="/var/tmp") as tmp:
        context = Path(tmp)
        shutil.copy2(DOCKER_DIR / dockerfile, context / "Dockerfile")
        for name, source in (files or {}).items():
            if not source.is_file():
                raise EnvironmentProblem(f"{source} is missing (needed to build {tag})")
            (context / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, context / name)
        for name, source in (trees or {}).items():
            shutil.copytree(source, context / name, ignore=_not_staged)
        argv = ["docker", "build", "--network", "host", "--force-rm", "--tag", tag]
        for key, value in (build_args or {}).items():
            argv += ["--build-arg", f"{key}={value}"]
        argv.append(str(context))
        env = dict(os.environ, DOCKER_BUILDKIT="0")  # the classic builder: same with any CLI
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=1800, check=False, env=env
        )
    if result.returncode != 0:
        # The failing step's own output is at the end of stdout (the classic builder).
        raise ToolFailed(argv, result.returncode, result.stderr + result.stdout[-4000:])
    cached = "Using cache" in result.stdout and "Running in" not in result.stdout
    if previous and previous != image_id(tag):
        # The image this tag named before is now untagged: remove it unless a container
        # still uses it (then docker refuses, and it stays).
        daemon.docker("image", "rm", previous, check=False)
    return Step(tag, time.monotonic() - began, cached=cached)


# Generated, not source: never staged into a build context.
UNSTAGED = (REPO / "zones" / "cache",)


def _not_staged(directory: str, names: list[str]) -> set[str]:
    return {
        name
        for name in names
        if name == "__pycache__" or name.endswith(".pyc") or Path(directory, name) in UNSTAGED
    }


def build_server(variant: str) -> Step:
    info = check_variant(variant)
    return build_image(
        server_tag(info.name),
        "Dockerfile.server",
        build_args={"BASE_SUITE": info.suite, "BACKPORTS": " ".join(info.backports)},
    )


def build_link(suite: str) -> Step:
    return build_image(
        link_tag(check_suite(suite)),
        "Dockerfile.link",
        build_args={"BASE_SUITE": suite},
        files={"linkem": LINKEM_BINARY},
    )


def build_prometheus(suite: str) -> Step:
    return build_image(
        prometheus_tag(check_suite(suite)),
        "Dockerfile.prometheus",
        build_args={"BASE_SUITE": suite},
        files={"prometheus.yml": DOCKER_DIR / "prometheus.yml"},
    )


def build_driver() -> Step:
    with tempfile.TemporaryDirectory(prefix="xfrbench-site-", dir="/var/tmp") as tmp:
        site = Path(tmp) / "site-packages"
        _install_locked_dependencies(site)
        trees = {"site-packages": site}
        trees |= {f"app/{name}": REPO / name for name in APP_TREES}
        files = {f"app/{name}": REPO / name for name in APP_FILES}
        files["linkem"] = LINKEM_BINARY
        files["driver-entrypoint.sh"] = DOCKER_DIR / "driver-entrypoint.sh"
        return build_image(
            driver_tag(),
            "Dockerfile.driver",
            build_args={"BASE_SUITE": DRIVER_SUITE},
            files=files,
            trees=trees,
        )


APP_TREES = ("harness", "servers", "scenarios", "zones")
APP_FILES = ("pyproject.toml", "uv.lock", "README.md")


def _install_locked_dependencies(target: Path) -> None:
    """uv.lock's runtime dependencies, installed by uv (with this host's index settings) into
    `target` for the driver image's Python: the image build itself needs no PyPI access."""
    uv = shutil.which("uv")
    if uv is None:
        raise EnvironmentProblem(
            "uv is missing (it installs the driver's dependencies)",
        )
    # The rrsum extension is a local path (no hash to require): copied as built, below.
    export_argv = [uv, "export", "--frozen", "--no-dev", "--no-emit-project"]
    export_argv += ["--no-emit-package", "xfrbench-rrsum", "--format", "requirements-txt"]
    export = subprocess.run(
        export_argv,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if export.returncode != 0:
        raise ToolFailed(["uv", "export"], export.returncode, export.stderr)
    requirements = target.parent / "requirements.txt"
    requirements.write_text(export.stdout)
    # Wheels for the image's interpreter, whatever Python this host runs: Debian 12 has
    # CPython 3.11 and glibc 2.36.
    argv = [uv, "pip", "install", "--target", str(target), "--python-version", "3.11"]
    argv += ["--python-platform", f"{platform.machine()}-manylinux_2_36"]
    argv += ["--require-hashes", "--requirement", str(requirements), "--quiet"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    if result.returncode != 0:
        raise ToolFailed(argv, result.returncode, result.stderr)
    _copy_rrsum_extension(target)


def _copy_rrsum_extension(target: Path) -> None:
    """The compiled RRSUM as `uv sync` built it here (CPython 3.11 abi3, this Debian 12
    host's glibc, as the driver image has): without it the driver image verifies with the
    Python reference, and its run.json says so."""
    try:
        import xfrbench_rrsum
    except ImportError:
        return
    package = Path(xfrbench_rrsum.__file__).parent
    shutil.copytree(package, target / package.name)


@dataclass(frozen=True)
class ImagePlan:
    """Which images to make; the bases they need follow from it."""

    servers: tuple[str, ...] = ("bookworm",)
    link_suite: str | None = "bookworm"
    prometheus_suite: str | None = None
    driver: bool = False
    rebuild_base: bool = False

    def suites(self) -> list[str]:
        wanted = [check_variant(v).suite for v in self.servers]
        wanted += [s for s in (self.link_suite, self.prometheus_suite) if s]
        if self.driver:
            wanted.append(DRIVER_SUITE)
        return [check_suite(s) for s in dict.fromkeys(wanted)]


def build_images(plan: ImagePlan, report: Callable[[Step], None] | None = None) -> list[Step]:
    """Start dockerd if needed, make the bases, then the images; returns each step timed."""
    steps: list[Step] = []

    def done(step: Step) -> None:
        steps.append(step)
        if report:
            report(step)

    began = time.monotonic()
    started = daemon.ensure_dockerd()
    done(
        Step(
            "dockerd",
            time.monotonic() - began,
            cached=started is None,
            detail=f"started (pid {started})" if started else "already answering",
        )
    )
    for suite in plan.suites():
        done(ensure_base(suite, rebuild=plan.rebuild_base))
    for variant in dict.fromkeys(plan.servers):
        done(build_server(variant))
    if plan.link_suite:
        done(build_link(plan.link_suite))
    if plan.prometheus_suite:
        done(build_prometheus(plan.prometheus_suite))
    if plan.driver:
        done(build_driver())
    return steps


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.compose.images",
        description="Build the compose backend's images locally (debootstrap bases, no registry).",
    )
    parser.add_argument(
        "--servers",
        default="bookworm",
        help=f"comma-separated server variants ({', '.join(SERVER_VARIANTS)}); default bookworm",
    )
    parser.add_argument("--link-suite", default="bookworm", help="suite of the link image")
    parser.add_argument("--prometheus-suite", help="also build the Prometheus image")
    parser.add_argument("--driver", action="store_true", help="also build the driver image")
    parser.add_argument(
        "--all",
        action="store_true",
        help="every server variant, and the link, Prometheus and driver images on bookworm",
    )
    parser.add_argument("--rebuild-base", action="store_true", help="debootstrap again")
    parser.add_argument(
        "--stop-dockerd",
        action="store_true",
        help="only stop the dockerd an earlier build started (by its pid file), then exit",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        if args.stop_dockerd:
            print(daemon.stop_dockerd() or "no dockerd started by xfrbench is running")
            return 0
        if args.all:
            plan = ImagePlan(
                servers=tuple(SERVER_VARIANTS),
                link_suite="bookworm",
                prometheus_suite="bookworm",
                driver=True,
                rebuild_base=args.rebuild_base,
            )
        else:
            plan = ImagePlan(
                servers=tuple(_csv(args.servers)),
                link_suite=args.link_suite or None,
                prometheus_suite=args.prometheus_suite,
                driver=args.driver,
                rebuild_base=args.rebuild_base,
            )
        began = time.monotonic()
        build_images(plan, report=lambda step: print(step.describe(), flush=True))
        print(f"images ready in {time.monotonic() - began:.1f} s")
        return 0
    except UserInputError as exc:
        print(f"xfrbench: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except (EnvironmentProblem, ToolFailed) as exc:
        print(f"xfrbench: error: {exc}", file=sys.stderr)
        return exc.exit_status


if __name__ == "__main__":
    sys.exit(main())
