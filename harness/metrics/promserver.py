"""A throwaway local Prometheus (Debian's /usr/bin/prometheus) that scrapes xfrbench.

For tests, and for users who want to watch a run without a Prometheus of their own:

    with PrometheusServer(["127.0.0.1:9187"], Path("prom")) as prom:
        ...  # xfrbench run --prometheus-port 9187 ...
        prom.query('xfrbench_transfers_total')

It listens on 127.0.0.1 on a free port, keeps its TSDB in ``workdir/data`` (blocks made with
``promtool tsdb create-blocks-from openmetrics metrics.om workdir/data`` before start are
served too) and its stdout/stderr in ``workdir``, and is stopped by its own pid on exit.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from harness.core.errors import EnvironmentProblem, XfrbenchError
from harness.core.stopping import stop_process

PROMETHEUS = Path("/usr/bin/prometheus")
START_TIMEOUT = 30.0  # seconds until /-/ready must answer
JOB = "xfrbench"


class PrometheusError(XfrbenchError):
    """Prometheus answered a query with an error (the message is Prometheus' own)."""


def render_config(
    scrape_targets: list[str], scrape_interval: float, file_sd: list[str] | None = None
) -> str:
    """prometheus.yml: one job "xfrbench" with static targets and target files (globs, such
    as results/prometheus-targets/*.json: a run on inventory hosts lists its hosts there),
    read again every second (pure). JSON is valid YAML."""
    interval = _duration(scrape_interval)
    job: dict[str, Any] = {
        "job_name": JOB,
        "scrape_interval": interval,
        "scrape_timeout": interval,
    }
    if scrape_targets:
        job["static_configs"] = [{"targets": list(scrape_targets)}]
    if file_sd:
        job["file_sd_configs"] = [{"files": list(file_sd), "refresh_interval": "1s"}]
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [job] if scrape_targets or file_sd else [],
    }
    return json.dumps(config, indent=2) + "\n"


def _duration(seconds: float) -> str:
    if seconds <= 0:
        raise ValueError(f"scrape interval {seconds} s must be positive")
    return f"{round(seconds * 1000)}ms"


def free_port(address: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


class PrometheusServer:
    def __init__(
        self,
        scrape_targets: list[str],
        workdir: Path,
        scrape_interval: float = 1.0,
        binary: Path = PROMETHEUS,
        file_sd: list[str] | None = None,
    ) -> None:
        self.scrape_targets = list(scrape_targets)
        self.file_sd = list(file_sd or [])
        self.workdir = Path(workdir)
        self.scrape_interval = scrape_interval
        self.binary = binary
        self.storage = self.workdir / "data"
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("Prometheus is not running")
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def __enter__(self) -> PrometheusServer:
        if not self.binary.exists() and shutil.which(str(self.binary)) is None:
            raise EnvironmentProblem(
                f"no Prometheus at {self.binary}; install it with apt-get install prometheus"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.storage.mkdir(exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(render_config(self.scrape_targets, self.scrape_interval, self.file_sd))
        try:
            for _attempt in range(3):  # the free port may be taken between probe and bind
                self.port = free_port()
                self._start(config)
                if self._wait_ready():
                    return self
                self._stop()
            raise EnvironmentProblem(
                f"Prometheus did not start: {_tail(self.workdir / 'prometheus.stderr')}"
            )
        except BaseException:
            self._stop()
            raise

    def _start(self, config: Path) -> None:
        argv = [
            str(self.binary),
            f"--config.file={config}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            f"--storage.tsdb.path={self.storage}",
            # Backfilled runs may be old: keep everything this throwaway server is given.
            "--storage.tsdb.retention.time=100y",
            f"--web.console.templates={self.workdir}",
            f"--web.console.libraries={self.workdir}",
        ]
        with (
            (self.workdir / "prometheus.stdout").open("ab") as out,
            (self.workdir / "prometheus.stderr").open("ab") as err,
        ):
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=self.workdir
            )

    def _wait_ready(self) -> bool:
        """True once /-/ready answers 200; False if the process exited first."""
        assert self._proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as answer:
                    if answer.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.05)
        raise EnvironmentProblem(
            f"Prometheus (pid {self._proc.pid}) not ready after {START_TIMEOUT:.0f} s: "
            f"{_tail(self.workdir / 'prometheus.stderr')}"
        )

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, 15)

    def _api(self, path: str, params: dict[str, str] | list[tuple[str, str]]) -> Any:
        body = urllib.parse.urlencode(params).encode()
        request = urllib.request.Request(
            self.url + path,
            data=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                reply = json.load(answer)
        except urllib.error.HTTPError as exc:
            try:
                reply = json.load(exc)
            except ValueError:
                raise PrometheusError(f"{path}: HTTP {exc.code}") from None
        if reply.get("status") != "success":
            raise PrometheusError(
                f"{path}: {reply.get('errorType', 'error')}: {reply.get('error', reply)}"
            )
        return reply["data"]

    def query(self, promql: str, time: float | None = None) -> list[dict[str, Any]]:
        """Instant query: the ``result`` list (``metric`` labels and ``value``)."""
        params = {"query": promql}
        if time is not None:
            params["time"] = f"{time:.3f}"
        return _result(self._api("/api/v1/query", params))

    def query_range(
        self, promql: str, start: float, end: float, step: float = 1.0
    ) -> list[dict[str, Any]]:
        """Range query: the ``result`` list (``metric`` labels and ``values``)."""
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step}"}
        return _result(self._api("/api/v1/query_range", params))

    def label_values(
        self, label: str, match: str, start: float | None = None, end: float | None = None
    ) -> list[str]:
        """What Grafana's ``label_values(match, label)`` lists."""
        params = [("match[]", match)]
        if start is not None and end is not None:
            params += [("start", f"{start:.3f}"), ("end", f"{end:.3f}")]
        query = urllib.parse.urlencode(params)
        path = f"/api/v1/label/{urllib.parse.quote(label)}/values?{query}"
        try:
            with urllib.request.urlopen(self.url + path, timeout=30) as answer:
                reply = json.load(answer)
        except urllib.error.HTTPError as exc:
            raise PrometheusError(f"label values of {label}: HTTP {exc.code}") from None
        return list(reply["data"])

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets with their health and last error."""
        with urllib.request.urlopen(self.url + "/api/v1/targets", timeout=30) as answer:
            return list(json.load(answer)["data"]["activeTargets"])

    def wait_for_targets(self, timeout: float = 30.0) -> None:
        """Wait until every configured target is on the scrape list (up or not yet): Prometheus
        hands new targets to its scrapers in batches, seconds after it starts."""
        wanted = set(self.scrape_targets)
        deadline = time.monotonic() + timeout
        while wanted - {t.get("labels", {}).get("instance") for t in self.targets()}:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Prometheus did not pick up {sorted(wanted)} in {timeout} s")
            time.sleep(0.1)

    def wait_for(self, promql: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll an instant query until it returns something; raise on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(promql)
            if result:
                return result
            if time.monotonic() > deadline:
                health = [
                    (t.get("scrapeUrl"), t.get("health"), t.get("lastError"))
                    for t in self.targets()
                ]
                raise TimeoutError(f"{promql!r} still empty after {timeout} s; targets {health}")
            time.sleep(0.1)


def _result(data: Any) -> list[dict[str, Any]]:
    return list(data.get("result", []))


def _tail(path: Path, lines: int = 5) -> str:
    with contextlib.suppress(OSError):
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    return "(no stderr)"
