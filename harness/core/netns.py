"""Enter a named network namespace from Python, per thread, without `ip netns exec`.

Python 3.11 has no ``os.setns``; libc's ``setns(2)`` is called through ctypes on the file
``/run/netns/<name>`` that ``ip netns add`` bind-mounts. ``setns`` switches only the calling
thread, so other threads (a sampler, a log reader) keep running in their namespaces. A socket
stays in the namespace it was created in, which lets the driver in the root namespace poll a
server inside its namespace every few milliseconds with one socket and no subprocess.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.core.errors import EnvironmentProblem, UserInputError

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
_THREAD_NET = "/proc/thread-self/ns/net"

_libc: ctypes.CDLL | None = None


def _setns(fd: int, what: str) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        hint = " (needs root: CAP_SYS_ADMIN)" if err == 1 else ""
        raise EnvironmentProblem(f"setns into {what} failed: {os.strerror(err)}{hint}")


def netns_path(netns: str) -> Path:
    """The bind-mount file of a named namespace; rejects names that are not plain names."""
    if not netns or "/" in netns or netns in (".", ".."):
        raise UserInputError(f"{netns!r} is not a network namespace name")
    return NETNS_DIR / netns


@contextmanager
def entered(netns: str | None) -> Iterator[None]:
    """Run the body with the calling thread inside ``netns`` (None: stay where we are).

    The thread's current namespace is opened first so that it can always be restored, also
    when the body raises.
    """
    if netns is None:
        yield
        return
    path = netns_path(netns)
    try:
        target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise EnvironmentProblem(
            f"network namespace {netns!r} does not exist ({path} missing)"
        ) from None
    try:
        own = os.open(_THREAD_NET, os.O_RDONLY | os.O_CLOEXEC)
    except BaseException:
        os.close(target)
        raise
    try:
        _setns(target, f"netns {netns!r}")
        try:
            yield
        finally:
            _setns(own, "the original network namespace")
    finally:
        os.close(target)
        os.close(own)


def socket_in(netns: str | None, family: int, type: int, proto: int = 0) -> socket.socket:
    """A socket created inside ``netns``; it keeps living there after we switch back."""
    with entered(netns):
        return socket.socket(family, type, proto)


def current_netns_inode() -> int:
    """Inode of the calling thread's network namespace (for tests and diagnostics)."""
    return os.stat(_THREAD_NET).st_ino
