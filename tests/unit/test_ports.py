"""A busy --listen address is refused at once, naming what holds it (ports.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kuberaven.ports import listen_conflict, parse_listeners, port_holder, short_command

PROC_NET_TCP = [
    "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0",
    "   1: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0",
    "   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5151 1 0",
    "   short line",
]


def test_only_listening_sockets_on_the_port_count() -> None:
    assert parse_listeners(PROC_NET_TCP, 8080) == {"4242"}  # not the established connection on 8080
    assert parse_listeners(PROC_NET_TCP, 22) == {"5151"}
    assert parse_listeners(PROC_NET_TCP, 9) == set()


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (
            ["/venv/bin/python3", "-m", "kuberaven", "run", "--listen", "127.0.0.1:8080", "-v"],
            "kuberaven run --listen 127.0.0.1:8080",
        ),
        (["/venv/bin/python3", "/venv/bin/kuberaven", "run"], "kuberaven run"),
        (["/usr/sbin/nginx", "-g", "daemon off;"], "nginx -g daemon off;"),
        (["python3"], "python3"),
        (["/usr/bin/python3", "-c", "import x\nx.run()"], "python3 -c import x x.run()"),
        ([], "unknown command"),
    ],
)
def test_the_holder_command_is_short(args: list[str], shown: str) -> None:
    assert short_command(args) == shown


def test_a_free_address_is_no_conflict() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert listen_conflict(f"127.0.0.1:{port}") is None


def test_a_busy_address_names_the_process_holding_it() -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\n"
            "s.listen()\nprint(s.getsockname()[1], flush=True)\ntime.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        port = int(holder.stdout.readline())
        conflict = listen_conflict(f"127.0.0.1:{port}")
        expected = f"127.0.0.1:{port} is in use by pid {holder.pid} ({Path(sys.executable).name} -c "
        assert conflict is not None and conflict.startswith(expected)
        assert "\n" not in conflict  # one line, though the holder's command line has several
        assert port_holder(port).startswith(f"pid {holder.pid} (")
        # Any address on the port: 0.0.0.0 overlaps 127.0.0.1.
        assert listen_conflict(f"0.0.0.0:{port}") is not None
    finally:
        holder.kill()
        holder.wait()


def test_a_port_with_no_visible_holder_is_another_process() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert port_holder(port) == "another process"
