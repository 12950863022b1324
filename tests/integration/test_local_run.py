"""`kuberaven run` with no cluster configured, as a newcomer uses it: one local cluster and one database
wherever they stand, a second run refused at once, and Ctrl-C stopping everything within seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuberaven.testing.free_ports import free_port
from kuberaven.testing.k8s_build import cache_dir
from kuberaven.testing.processes import pid_alive
from tests.helpers import http_status

# Correctness bounds, not performance: a clean stop takes a few seconds; the zombie bug took over 60.
STOP_WITHIN = 15.0
REFUSED_WITHIN = 10.0


def _newcomer_env(tmp_path: Path, listen: str) -> dict[str, str]:
    """No cluster configured anywhere, a home and data directory of its own, the Kubernetes build shared."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERAVEN_") and k != "KUBECONFIG"}
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        KUBERAVEN_LISTEN=listen,
        KUBERAVEN_K8S_CACHE=str(cache_dir()),
    )
    return env


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (the testenv supervisor sits in a session of its own, still our child)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat[stat.rfind(")") + 2 :].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _kuberaven(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kuberaven", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def newcomer_run(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, str], str]]:
    listen = f"127.0.0.1:{free_port()}"
    env = _newcomer_env(tmp_path, listen)
    (tmp_path / "home").mkdir()
    (tmp_path / "repo").mkdir()
    log = tmp_path / "run.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "kuberaven", "run", "--no-network"],
            env=env,
            cwd=tmp_path / "repo",
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 240
        while http_status(f"http://{listen}/readyz") != 200:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        yield process, env, listen
    finally:
        below = _descendants(process.pid)
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in below:  # what an interrupted test would leave behind: its own processes only
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_newcomer_session_one_cluster_one_database_a_second_run_refused_and_ctrl_c_stops_all(
    newcomer_run: tuple[subprocess.Popen[bytes], dict[str, str], str], tmp_path: Path
) -> None:
    process, env, listen = newcomer_run
    data = tmp_path / "data" / "kuberaven"

    # kubectl's environment, from anywhere.
    exports = _kuberaven(env, tmp_path, "testenv", "env")
    assert exports.returncode == 0, exports.stderr
    assert exports.stdout.splitlines()[0] == f"export KUBECONFIG={data}/testenv/kubeconfig"

    # The CLI, from another directory, uses the daemon's database and says nothing about it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    got = _kuberaven(env, elsewhere, "get", "KubernetesService", "-o", "json")
    assert got.returncode == 0 and got.stderr == "", got.stderr
    assert '"name": "kubernetes"' in got.stdout  # the daemon's bootstrap row: its database
    assert not list(elsewhere.iterdir()), "a database was made in the current directory"
    other = _kuberaven(env, elsewhere, "get", "KubernetesService", "--db", f"sqlite:///{tmp_path}/other.db")
    assert other.returncode == 0
    assert f"not the one the running `kuberaven run` (pid {process.pid}) uses" in other.stderr

    # A second run: refused at once, one line naming the port and its holder, nothing started.
    started = time.monotonic()
    second = _kuberaven(env, elsewhere, "run", "--no-network")
    assert time.monotonic() - started < REFUSED_WITHIN
    assert second.returncode == 1
    holder = f"pid {process.pid} (kuberaven run --no-network)"
    assert second.stderr.splitlines() == [f"error: {listen} is in use by {holder}"]

    # Ctrl-C: the daemon, the supervisor and every server of the local cluster are gone within seconds.
    tree = _descendants(process.pid)
    assert len(tree) >= 4, tree  # supervisor, etcd, kube-apiserver, ... are below it
    process.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_WITHIN
    while (process.poll() is None or any(pid_alive(p) for p in tree)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process.poll() == 0
    assert [p for p in tree if pid_alive(p)] == []
    assert not (data / "testenv" / "env.json").exists()
    assert not (data / "testenv" / "daemon.json").exists()
