"""The daemon's first start, and the code before a change beside it: run_bench.py's start-up rows, repeated.

On an empty cluster (its own local control plane and broker, as run_bench.py
makes them), each round runs, one after the other:

* the raw mirror (raw_mirror.py: GET the pods, insert them into SQLite, the
  interpreter's start included), the baseline;
* `kuberaven run` on a fresh database, spawn → /readyz 200, and its RSS once idle;
* with ``--before DIRS``: the same with DIRS (os.pathsep-separated source
  directories, e.g. another checkout's ``src`` and
  ``examples/simpleexampleservice``) first on PYTHONPATH.

Each row is the median of ``--rounds`` rounds, its ratio to the raw mirror's median.

    python bench/startup_bench.py [--rounds 5] [--before DIRS]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import print_table
from kuberaven.testing.env import TestEnv
from run_bench import ratio, raw_baseline, run_daemon


def rounds(env: TestEnv, directory: Path, count: int, before: str | None) -> dict[str, list[float]]:
    """Seconds (and idle MiB) of every round, the measures interleaved round by round."""
    kubeconfig = env.control_plane.kubeconfig
    found: dict[str, list[float]] = {}
    sides = {"": None, **({"before: ": before} if before else {})}
    for round_ in range(count + 1):
        seconds, _ = raw_baseline(kubeconfig, directory / f"raw-{round_}.db")
        measured = {"raw": seconds}
        for name, pythonpath in sides.items():
            tag = f"{name.strip(': ') or 'after'}-{round_}"
            run = run_daemon(env, directory / f"{tag}.db", directory / f"{tag}.log", 0, pythonpath=pythonpath)
            measured[f"{name}ready"] = run.ready or float("nan")
            measured[f"{name}idle MiB"] = run.idle_mib
        if round_:  # the first round warms the page cache and the .pyc files
            for key, value in measured.items():
                found.setdefault(key, []).append(value)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", help="source directories of the code before a change, first on PYTHONPATH")
    args = parser.parse_args()
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
    rows = [("raw mirror, empty cluster: spawn → done", f"{raw:.2f} s", "", "")]
    for name in ("", "before: ") if args.before else ("",):
        rows += [
            (
                f"{name}empty cluster, fresh database: spawn → ready",
                f"{medians[f'{name}ready']:.2f} s",
                f"{raw:.2f} s raw",
                ratio(medians[f"{name}ready"], raw),
            ),
            (f"{name}empty cluster: idle RSS", f"{medians[f'{name}idle MiB']:.0f} MiB", "", ""),
        ]
    print_table(rows)
    print(f"median of {args.rounds} rounds, interleaved")


if __name__ == "__main__":
    main()
