"""The environments' ports (testing/free_ports.py): outside the ephemeral range, and never one port for two
processes, since the servers bind them some seconds after the pick."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from kuberaven.testing import free_ports
from kuberaven.testing.free_ports import EPHEMERAL_RANGE, free_port

WINDOW = range(24000, 24040)  # a narrow choice, so that two processes picking from it would meet
PICKS = 15

HOLDER = f"""
import sys, time
from kuberaven.testing import free_ports
free_ports._choices = lambda: range({WINDOW.start}, {WINDOW.stop})
print(" ".join(str(free_ports.free_port()) for _ in range({PICKS})), flush=True)
time.sleep(60)
"""


def test_a_port_is_picked_below_the_ephemeral_range_and_is_free() -> None:
    low, _ = (int(n) for n in EPHEMERAL_RANGE.read_text().split())
    for _ in range(20):
        port = free_port()
        assert free_ports.LOWEST <= port < low
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))  # nothing had it


def test_two_processes_never_pick_the_same_port(monkeypatch: pytest.MonkeyPatch) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        theirs = {int(port) for port in holder.stdout.readline().split()}
        assert len(theirs) == PICKS and theirs <= set(WINDOW)
        monkeypatch.setattr(free_ports, "_choices", lambda: WINDOW)
        ours = {free_port() for _ in range(PICKS)}
        assert len(ours) == PICKS
        assert not ours & theirs  # reserved while the holder lives, though it binds none of them
    finally:
        holder.kill()
        holder.wait()


def test_a_port_that_a_server_holds_is_not_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        busy = server.getsockname()[1]
        monkeypatch.setattr(free_ports, "_choices", lambda: range(busy, busy + 1))
        with pytest.raises(RuntimeError, match="no free loopback port"):
            free_port()
