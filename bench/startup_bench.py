"""The daemon's first start, and the code before a change beside it: run_bench.py's start-up rows, repeated.

On an empty cluster (its own local control plane and broker, as run_bench.py
makes them), each round runs, one after the other:

* the raw mirror (raw_mirror.py: GET the pods, insert them into SQLite, the
  interpreter's start included), the baseline;
* `kuberaven run` on a fresh database, spawn → /readyz 200, the CPU time (user +
  system) the daemon used by then, which a busy machine hardly changes, and its
  RSS once settled;
* with ``--before DIRS``: the same with DIRS (os.pathsep-separated source
  directories, e.g. another checkout's ``src`` and
  ``examples/simpleexampleservice``) first on PYTHONPATH.

The measured trees' bytecode is written first (compiled.py), as an
installation has it. Each row is the median of ``--rounds`` rounds, its ratio to the raw mirror's median.

    python bench/startup_bench.py [--rounds 5] [--before DIRS]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from common import print_table
from compiled import compile_trees
from kuberaven.testing.env import TestEnv
from run_bench import Daemon, ratio, raw_baseline

READY_POLL = 0.02  # seconds between /readyz requests: the start is timed to about this
SETTLE = 3.0  # seconds after ready before the RSS is read, as run_bench.py's idle
TIMEOUT = 300.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (/proc/PID/stat's utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_once(env: TestEnv, database: Path, log: Path, pythonpath: str | None) -> tuple[float, float, float]:
    """Spawn → /readyz 200: the wall seconds and the daemon's CPU seconds by then; its RSS (MiB) once settled."""
    daemon = Daemon(env, database, log, pythonpath)
    try:
        while time.perf_counter() - daemon.started < TIMEOUT:
            if daemon.readyz()[0] == 200:
                ready, cpu = time.perf_counter() - daemon.started, cpu_seconds(daemon.process.pid)
                time.sleep(SETTLE)
                return ready, cpu, daemon.rss_mib()
            if daemon.process.poll() is not None:
                raise SystemExit(f"kuberaven run exited with {daemon.process.returncode}; see {log}")
            time.sleep(READY_POLL)
        raise SystemExit(f"kuberaven run was not ready within {TIMEOUT:.0f} s; see {log}")
    finally:
        daemon.stop()


def rounds(env: TestEnv, directory: Path, count: int, before: str | None) -> dict[str, list[float]]:
    """Seconds (and idle MiB) of every round, the measures interleaved round by round."""
    kubeconfig = env.control_plane.kubeconfig
    found: dict[str, list[float]] = {}
    sides = {"": None, **({"before: ": before} if before else {})}
    for round_ in range(count + 1):
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds, _ = raw_baseline(kubeconfig, directory / f"raw-{round_}.db")
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        measured = {"raw": seconds, "raw CPU": now.ru_utime - used.ru_utime + now.ru_stime - used.ru_stime}
        for name, pythonpath in sides.items():
            tag = f"{name.strip(': ') or 'after'}-{round_}"
            ready, cpu, rss = start_once(env, directory / f"{tag}.db", directory / f"{tag}.log", pythonpath)
            measured[f"{name}ready"], measured[f"{name}CPU"], measured[f"{name}idle MiB"] = ready, cpu, rss
        if round_:  # the first round warms the page cache and the .pyc files
            for key, value in measured.items():
                found.setdefault(key, []).append(value)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", help="source directories of the code before a change, first on PYTHONPATH")
    args = parser.parse_args()
    compile_trees(args.before)  # as installed code starts: with its bytecode (compiled.py says why)
    with tempfile.TemporaryDirectory(prefix="kuberaven-startup-bench-") as name:
        directory = Path(name)
        env = TestEnv(directory / "env", nodes=1)
        env.start()
        try:
            found = rounds(env, directory, args.rounds, args.before)
        finally:
            env.stop()
    medians = {key: statistics.median(values) for key, values in found.items()}
    raw = medians["raw"]
    raw_cpu = medians["raw CPU"]
    rows = [
        ("raw mirror, empty cluster: spawn → done", f"{raw:.2f} s", "", ""),
        ("  its CPU time", f"{raw_cpu:.2f} s", "", ""),
    ]
    for name in ("", "before: ") if args.before else ("",):
        rows += [
            (
                f"{name}empty cluster, fresh database: spawn → ready",
                f"{medians[f'{name}ready']:.2f} s",
                f"{raw:.2f} s raw",
                ratio(medians[f"{name}ready"], raw),
            ),
            (
                f"{name}  CPU time of the daemon by then",
                f"{medians[f'{name}CPU']:.2f} s",
                f"{raw_cpu:.2f} s raw",
                ratio(medians[f"{name}CPU"], raw_cpu),
            ),
            (f"{name}empty cluster: idle RSS", f"{medians[f'{name}idle MiB']:.0f} MiB", "", ""),
        ]
    print_table(rows)
    print(f"median of {args.rounds} rounds, interleaved")


if __name__ == "__main__":
    main()
