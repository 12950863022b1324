"""pid_alive: a zombie is not alive (a stop that waited for one waited out its whole timeout); stop_all stops
children together; a pid reused by another process is not signalled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kuberaven.testing.processes import Process, end_all, pid_alive, process_state, start_time, stop_all


def _wait_for_state(pid: int, state: str) -> None:
    deadline = time.monotonic() + 10
    while process_state(pid) != state:
        assert time.monotonic() < deadline, f"pid {pid} never reached state {state}"
        time.sleep(0.01)


def test_our_own_exited_child_is_not_alive_and_is_reaped() -> None:
    child = subprocess.Popen(["true"])
    _wait_for_state(child.pid, "Z")  # exited, and nobody called wait()
    assert not pid_alive(child.pid)
    assert process_state(child.pid) is None, "the zombie was not reaped"
    assert child.poll() is not None  # Popen copes with the reap done behind its back


def test_another_process_zombie_child_is_not_alive() -> None:
    # A parent that never reaps its child: the grandchild stays a zombie we cannot reap.
    script = "import os, time\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nprint(pid, flush=True)\ntime.sleep(60)"
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        zombie = int(parent.stdout.readline())
        _wait_for_state(zombie, "Z")
        assert not pid_alive(zombie)
        assert process_state(zombie) == "Z"  # still there: only its parent may reap it
        assert pid_alive(parent.pid)
    finally:
        parent.kill()
        parent.wait()


def test_running_and_vanished_processes() -> None:
    assert pid_alive(os.getpid())
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert pid_alive(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not pid_alive(sleeper.pid)
    assert process_state(sleeper.pid) is None


# Appends "<name> TERM" to the log on SIGTERM; with ignore, goes on appending "<name> alive" until killed.
_TRAP = """
import signal, sys, time
name, log, ignore = sys.argv[1], sys.argv[2], sys.argv[3] == "ignore"
def term(*_):
    with open(log, "a") as f:
        f.write(name + " TERM\\n")
    if not ignore:
        sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
while True:
    time.sleep(0.05)
    if ignore:
        with open(log, "a") as f:
            f.write(name + " alive\\n")
"""


def test_stop_all_signals_every_process_before_waiting_and_kills_one_that_ignores_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "signals.log"
    stubborn = Process(
        "stubborn", [sys.executable, "-c", _TRAP, "stubborn", str(log), "ignore"], tmp_path, stop_timeout=1
    )
    polite = Process("polite", [sys.executable, "-c", _TRAP, "polite", str(log), "exit"], tmp_path, stop_timeout=1)
    for process in (stubborn, polite):
        process.start()
    for process in (stubborn, polite):
        _wait_for_line(process.log_path, "ready")
    popens = [stubborn.popen, polite.popen]
    stop_all([stubborn, polite])
    assert [p.returncode for p in popens if p is not None] == [-signal.SIGKILL, 0]
    lines = log.read_text().splitlines()
    # The second got its SIGTERM while the first, which ignores it, was still running: not one after the other.
    assert "polite TERM" in lines and "stubborn TERM" in lines, lines
    assert lines.index("polite TERM") < max(i for i, line in enumerate(lines) if line == "stubborn alive"), lines
    assert stubborn.popen is None and polite.popen is None
    stop_all([stubborn, polite])  # stopped ones: nothing to do


def _wait_for_line(path: Path, line: str) -> None:
    deadline = time.monotonic() + 20
    while not (path.exists() and line in path.read_text().splitlines()):
        assert time.monotonic() < deadline, f"{path} never said {line!r}"
        time.sleep(0.01)


def test_a_pid_that_another_process_took_is_not_killed() -> None:
    """A stop's tree names its processes by pid and start time: once one exits, its pid may be another
    process's (another environment's ovn-controller died so, silently), and that one must live on."""
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        started = start_time(stranger.pid)
        assert started is not None
        end_all({stranger.pid: started - 1}, timeout=0)  # the pid as a process that started earlier had it
        assert stranger.poll() is None, "a stranger with a reused pid was killed"
        end_all({stranger.pid: started}, timeout=0)
        assert stranger.wait(10) == -signal.SIGKILL
    finally:
        stranger.kill()
