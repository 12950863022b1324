"""pid_alive: a zombie is not alive (a stop that waited for one waited out its whole timeout)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from kuberaven.testing.processes import pid_alive, process_state


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
