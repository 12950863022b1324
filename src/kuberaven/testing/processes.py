"""Child processes of the local control plane (testing/): start, stop, never orphan.

Every child gets PR_SET_PDEATHSIG=SIGKILL, so the kernel kills it if the
process that started it dies, even by SIGKILL (an interrupted test run leaves
nothing behind).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux: fall back to explicit stop() and atexit


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """One long-running child with its output in ``<dir>/<name>.log``."""

    def __init__(self, name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None):
        self.name = name
        self.args = args
        self.log_path = log_dir / f"{name}.log"
        self.env = env
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.popen = subprocess.Popen(
            self.args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            preexec_fn=_die_with_parent,
        )
        log.close()

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            raise RuntimeError(f"{self.name} exited; last lines of {self.log_path}:\n{self.tail()}")

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.popen is not None
            self.popen.send_signal(sig)

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.popen = None


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1, process: Process | None = None):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None:
            process.check_alive()
        try:
            result = predicate()
            if result:
                return result
        except Exception as error:  # the thing we wait for is not up yet
            last_error = error
        time.sleep(interval)
    detail = f" (last error: {last_error})" if last_error else ""
    raise TimeoutError(f"{what} not ready within {timeout:.0f}s{detail}")


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` still runs. A zombie (exited, not yet reaped) does not: one that is our own
    child is reaped here; another's is left to its parent. (``kill(pid, 0)`` succeeds on a zombie, so
    a stop that waited for it used to wait out its whole timeout.)"""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False  # our child, exited: reaped now
    except ChildProcessError:
        pass  # not our child (or already reaped)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    return process_state(pid) not in _DEAD_STATES


# States in /proc/PID/stat of a process that has exited: zombie, dead.
_DEAD_STATES = frozenset({"Z", "X"})


def process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` from /proc (R, S, D, T, Z, ...); None without /proc or such a process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ...": comm may hold spaces and parentheses, so split after the last ")".
    fields = stat[stat.rfind(")") + 1 :].split()
    return fields[0] if fields else None
