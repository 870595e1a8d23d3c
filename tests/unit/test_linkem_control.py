"""linkem's runtime control from the harness: its config, the commands, the client, and the
backend a testbed with faults picks (the real emulator is driven in tests/system/test_faults.py)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import UserInputError
from harness.link import linkem
from harness.spec import DirectionSpec, LinkSpec
from harness.testbed.core import choose_backend


def test_config_with_control_and_inspect() -> None:
    spec = DirectionSpec()
    config = linkem.config(
        [("forward", spec, 10), ("reverse", spec, 11)],
        rtt=0.0,
        seed=1,
        stats_path=Path("/x/s.json"),
        control_path=Path("/run/xfrbench/linkem/ab12cd.sock"),
        inspect=True,
    )
    assert config["control_path"] == "/run/xfrbench/linkem/ab12cd.sock"
    assert [d["inspect"] for d in config["directions"]] == [True, True]
    plain = linkem.config([("forward", spec, 10)], rtt=0.0, seed=1, stats_path=Path("/s"))
    assert "control_path" not in plain and "inspect" not in plain["directions"][0]


def test_commands() -> None:
    assert linkem.set_command("forward", down=True) == {
        "cmd": "set",
        "direction": "forward",
        "down": True,
    }
    assert linkem.set_command("s-1 reverse", rate_bps=1_000_000, queue_bytes=12_500) == {
        "cmd": "set",
        "direction": "s-1 reverse",
        "rate_bps": 1_000_000,
        "queue_bytes": 12_500,
    }
    assert linkem.reset_command("forward", after_bytes=5000) == {
        "cmd": "reset",
        "direction": "forward",
        "after_bytes": 5000,
    }
    assert linkem.reset_command("forward") == {"cmd": "reset", "direction": "forward"}
    assert linkem.restore_command("forward") == {"cmd": "restore", "direction": "forward"}
    loss = DirectionSpec.model_validate({"loss": "10%"}).loss
    assert linkem.impair_patch(0.15, loss) == {
        "delay_us": 150_000,
        "loss": {"model": "random", "p": 0.1, "correlation": 0.0},
    }


class FakeLinkem:
    """The control socket's protocol, answered from a script (linkem itself needs root)."""

    def __init__(self, path: Path, answers: list[dict[str, Any]]) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(4)
        self.answers = answers
        self.got: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        for answer in self.answers:
            conn, _ = self.server.accept()
            with conn:
                self.got.append(json.loads(conn.makefile("rb").readline()))
                conn.sendall(json.dumps(answer).encode() + b"\n")


def test_client_sends_one_line_and_reads_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "c.sock"
    fake = FakeLinkem(
        path,
        [
            {"ok": True, "at_unix": 5.0, "direction": "forward", "armed": False, "state": {}},
            {"ok": False, "error": 'no direction named "x"; linkem has forward'},
            {"updated_at_unix": 6.0, "directions": {}, "events": []},
        ],
    )
    control = linkem.LinkemControl(path, timeout=5)
    assert control.send(linkem.set_command("forward", down=True))["at_unix"] == 5.0
    with pytest.raises(linkem.LinkemControlError, match="no direction named"):
        control.send(linkem.restore_command("x"))
    assert control.stats()["updated_at_unix"] == 6.0
    fake.thread.join(5)
    assert fake.got[0] == {"cmd": "set", "direction": "forward", "down": True}
    assert fake.got[2] == {"cmd": "stats"}


def test_client_names_the_socket_it_cannot_reach(tmp_path: Path) -> None:
    control = linkem.LinkemControl(tmp_path / "none.sock", timeout=1)
    with pytest.raises(linkem.LinkemControlError, match="none.sock"):
        control.stats()


def test_faults_run_linkem_even_on_an_unimpaired_link_or_a_netem_kernel() -> None:
    plain = [LinkSpec()]
    assert choose_backend(plain, netem_available=True) == "none"
    assert choose_backend(plain, netem_available=True, faults=True) == "linkem"
    assert choose_backend(plain, netem_available=False, faults=True) == "linkem"
    netem = [LinkSpec.model_validate({"backend": "netem", "delay": "1ms"})]
    with pytest.raises(UserInputError, match="faults need linkem"):
        choose_backend(netem, netem_available=True, faults=True)
