"""A nested node's VM's control channel (testing/vm_guest.py's server, vm_exec.py's client), on this host's
loopback: output and exit codes as a shell gives them, stdin, the token, and a client that hangs up killing its
command's whole process group."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuberaven.testing.free_ports import free_port
from kuberaven.testing.vm_exec import CONTROL_FILE, Control, GuestUnreachable, run
from kuberaven.testing.vm_guest import EXIT, STDOUT, exit_code, frame, read_frame, serve

TOKEN = "s3cret"


@pytest.fixture(scope="module")
def control() -> Iterator[Control]:
    """vm_guest's server on 127.0.0.1, relaying nothing, on a thread of this process (it never stops: a daemon)."""
    port = free_port()
    threading.Thread(target=serve, args=({"listen": ["127.0.0.1", port], "token": TOKEN},), daemon=True).start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield Control("127.0.0.1", port, TOKEN)


def test_frames_read_back_and_exit_codes_are_a_shells() -> None:
    stream = _Reader(frame(STDOUT, b"hello") + frame(EXIT, b"0"))
    assert read_frame(stream) == (STDOUT, b"hello") and read_frame(stream) == (EXIT, b"0")
    assert read_frame(stream) is None
    assert (exit_code(0), exit_code(3), exit_code(-signal.SIGKILL)) == (0, 3, 137)


def test_a_command_runs_with_stdin_env_and_both_outputs_apart(control: Control) -> None:
    program = "import os, sys; print(sys.stdin.read().upper()); print(os.environ['WHO'], file=sys.stderr); exit(3)"
    assert run(control, [sys.executable, "-c", program], {"WHO": "guest"}, b"cni config") == (
        3, b"CNI CONFIG\n", b"guest\n",
    )  # fmt: skip
    code, _, error = run(control, ["/nonexistent/program"])
    assert code == 127 and b"/nonexistent/program" in error


def test_a_wrong_token_runs_nothing(control: Control) -> None:
    with pytest.raises(GuestUnreachable, match="wrong token"):
        run(Control(control.host, control.port, "guess"), ["true"])


def test_the_command_line_passes_stdin_env_and_the_exit_code(control: Control, tmp_path: Path) -> None:
    """`python -m kuberaven.testing.vm_exec <dir> -i -e NAME=VALUE -- command…`: what env.json's ``exec`` says."""
    (tmp_path / CONTROL_FILE).write_text(json.dumps(control.__dict__))
    client = [sys.executable, "-m", "kuberaven.testing.vm_exec", str(tmp_path)]
    script = ["sh", "-c", 'cat; echo " $WHO"; exit 4']
    done = subprocess.run([*client, "-i", "-e", "WHO=guest", "--", *script], input=b"stdin", capture_output=True)
    assert (done.returncode, done.stdout) == (4, b"stdin guest\n"), done.stderr
    silent = subprocess.run([*client, "--", "cat"], input=b"not given", capture_output=True, timeout=30)
    assert (silent.returncode, silent.stdout) == (0, b""), "without -i the command's stdin is empty"


def test_a_client_that_hangs_up_kills_its_commands_process_group(control: Control, tmp_path: Path) -> None:
    """What ends a node agent run through vm_exec when its host process is killed (testenv's restarts)."""
    pid_file = tmp_path / "pid"
    (tmp_path / CONTROL_FILE).write_text(json.dumps(control.__dict__))
    script = f"sleep 300 & echo $! > {pid_file}; wait"
    client = subprocess.Popen(
        [sys.executable, "-m", "kuberaven.testing.vm_exec", str(tmp_path), "--", "sh", "-c", script]
    )
    try:
        deadline = time.monotonic() + 20
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        sleeper = int(pid_file.read_text())
        client.kill()
        client.wait()
        deadline = time.monotonic() + 10
        while _alive(sleeper) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(sleeper), "the command's child outlived its client"
    finally:
        client.kill()
        client.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, size: int) -> bytes:
        chunk, self.data = self.data[:size], self.data[size:]
        return chunk
