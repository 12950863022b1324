"""Child processes of the local control plane (testing/): start, stop, never orphan.

Every child gets PR_SET_PDEATHSIG=SIGKILL, so the kernel kills it if the
process that started it dies, even by SIGKILL (an interrupted test run leaves
nothing behind). ``stop()`` ends the child's whole tree: servers fork workers
(neutron-server's OVN maintenance worker, octavia-worker's), which the kernel
does not kill with their parent, and one has been seen to ignore SIGTERM. A
process counts as gone once it is a zombie: detached ones are reparented to
PID 1, which may be slow to reap them. A process of the tree is known by its pid
and its start time: pids are reused (pid_max may be 32768, and a test run makes
thousands of processes), and a signal meant for an exited worker must not reach
the stranger that took its pid, another environment's ovn-controller say.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

_PR_SET_PDEATHSIG = 1
# A program of the standard library alone (a pod's server or client, a probe, a NIC setting) in a network
# namespace: an interpreter with no site (-S) starts in half the CPU (about 20 ms instead of 44 on a 2-core test
# host), and the data path's tests start such processes by the thousand.
STDLIB_PYTHON = (sys.executable, "-S")


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux: fall back to explicit stop() and atexit


class Process:
    """One long-running child with its output in ``<dir>/<name>.log``."""

    def __init__(
        self, name: str, args: list[str], log_dir: Path, env: dict[str, str] | None = None, stop_timeout: float = 10.0
    ) -> None:
        self.name = name
        self.stop_timeout = stop_timeout  # seconds between SIGTERM and SIGKILL
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

    @property
    def returncode(self) -> int | None:
        """How it ended: its exit code, or minus the signal that killed it (None: running, or never started)."""
        return self.popen.poll() if self.popen is not None else None

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

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM to the child and every descendant, SIGKILL to what is left after ``timeout``."""
        stop_all([self], timeout)

    def _terminate(self) -> Tree:
        """SIGTERM to the child and its descendants (SIGCONT first: a paused one cannot handle it); the tree."""
        assert self.popen is not None
        tree = descendants(self.popen.pid) if self.popen.poll() is None else {}
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGCONT)
            self.popen.terminate()
        for pid, started in tree.items():
            _signal(pid, started, signal.SIGTERM)
        return tree

    def _reap(self, tree: Tree, deadline: float) -> None:
        """Until the child and ``tree`` are gone: SIGKILL to what still runs at ``deadline`` (monotonic). The
        child's descendants are read again only while it is not reaped: once it is, its pid is anyone's."""
        assert self.popen is not None
        try:
            self.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            tree = {**tree, **descendants(self.popen.pid)}  # forked since the SIGTERM
            self.popen.kill()
            self.popen.wait()
        end_all(tree, max(0.0, deadline - time.monotonic()))
        self.popen = None


def stop_all(processes: Iterable[Process], timeout: float | None = None) -> None:
    """Stop children together: SIGTERM to all at once, then each gets its ``stop_timeout`` (or ``timeout``)
    from that moment, so servers that need no order among them stop in the longest one's time, not the sum."""
    started = time.monotonic()
    stopping = [(p, p._terminate()) for p in processes if p.popen is not None]
    for process, tree in stopping:
        process._reap(tree, started + (process.stop_timeout if timeout is None else timeout))


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


def running(pid: int) -> bool:
    """Whether ``pid`` runs: exists and is not a zombie (state Z in /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


Tree = dict[int, int]  # processes by pid, each with its start time (a pid reused since is not the same process)


def descendants(pid: int) -> Tree:
    """Every running descendant of ``pid`` (children, their children …), from /proc, with its start time."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {p: started for p in found if running(p) and (started := start_time(p)) is not None}


def _signal(pid: int, started: int, sig: int) -> None:
    """``sig`` to ``pid`` if it is still the process that started at ``started``."""
    if start_time(pid) == started:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _runs(pid: int, started: int) -> bool:
    return start_time(pid) == started and running(pid)


def end_all(tree: Tree, timeout: float = 10.0) -> None:
    """Until none of ``tree`` runs: they were sent SIGTERM; SIGKILL what is still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    while any(_runs(p, s) for p, s in tree.items()) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid, started in tree.items():
        if _runs(pid, started):
            _signal(pid, started, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while any(_runs(p, s) for p, s in tree.items()) and time.monotonic() < deadline:
        time.sleep(0.05)


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` still runs. A zombie (exited, not yet reaped) does not: one that is our own
    child is reaped here; another's is left to its parent. (``kill(pid, 0)`` succeeds on a zombie, so
    a stop that waited for it would wait out its whole timeout.)"""
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


START_TIME_FIELD = 19  # starttime (field 22 of /proc/PID/stat), counted from the state (field 3)


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, from /proc); None without such a process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rfind(")") + 1 :].split()[START_TIME_FIELD])
    except (OSError, IndexError, ValueError):
        return None
