"""Loopback ports for the local environments' servers (testing/): picked now, bound by a server later.

A port picked with bind(0) comes from the kernel's ephemeral range, the range that every outgoing
connection's source port comes from too. Between the pick and the server's own bind, a client of any
process (a test's HTTP request, a database connection) can take it, and the server dies with "Address
already in use". So ports are picked below that range, where no source port is ever taken, and each pick
is reserved across processes: a record lock on the port's byte of one file per user, held by the picking
process for as long as it lives (the kernel drops it when the process ends, even by SIGKILL), so that two
test processes or environments never pick the same port.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import threading
from pathlib import Path

LOWEST = 10000  # above the well-known and registered ports that servers of the host usually have
LEAST_CHOICE = 1000  # below the ephemeral range, at least this many ports to choose from, or else above it
TRIES = 200
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)  # Linux's default, where /proc does not say

_lock = threading.Lock()
_held: set[int] = set()
_reservations: int | None = None  # the lock file, open for the life of the process


def free_port() -> int:
    """A loopback port that nothing listens on, outside the ephemeral range, reserved for this process."""
    choices = _choices()
    with _lock:
        for _ in range(TRIES):
            port = random.choice(choices)
            if port not in _held and _reserve(port) and _bindable(port):
                return port
    raise RuntimeError(f"no free loopback port among {choices} after {TRIES} tries")


def _choices() -> range:
    try:
        low, high = (int(n) for n in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        low, high = DEFAULT_EPHEMERAL
    if low - LOWEST >= LEAST_CHOICE:
        return range(LOWEST, low)
    return range(high + 1, 65536)


def _reserve(port: int) -> bool:
    """Whether this process now holds ``port`` (no other process of this user has it)."""
    global _reservations
    if _reservations is None:
        path = Path(tempfile.gettempdir()) / f"kuberaven-ports-{os.getuid()}.lock"
        _reservations = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.lockf(_reservations, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
    except OSError:
        return False
    _held.add(port)
    return True


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
