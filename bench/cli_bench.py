"""The CLI as a user feels it: `kuberaven --help` and `kuberaven get`, beside `kubectl version --client`.

Every command runs as a new process (interpreter start included), the runs of
the measures interleaved so that a busy machine slows each alike; each row is
the median of ``--runs`` runs, its ratio to the median of the baseline; beside
each, the median CPU time (user + system) of its process, which a busy machine
hardly changes.

* ``kuberaven --help``: what a command costs before it does anything;
* ``kuberaven get Slice -o json`` on a database at the newest schema (the
  usual case: `kuberaven run` or an earlier command made it);
* the same on a fresh database each run (the very first command: the schema's
  migrations are part of it);
* ``python -c pass``: the interpreter's own start, for scale.

The measured trees' bytecode is written first (compiled.py), as an
installation has it.

The baseline is ``kubectl version --client`` (a Go binary that reads no
cluster); without kubectl on PATH the bench says so and prints no ratios.
``--before DIRS`` (os.pathsep-separated source directories, e.g. another
checkout's ``src`` and ``examples/simpleexampleservice``) runs every
kuberaven measure a second time with those first on PYTHONPATH, interleaved
with the others: the code before a change, beside it in the same run.

    python bench/cli_bench.py [--runs 15] [--kuberaven PATH] [--before DIRS]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import print_table
from compiled import compile_trees

Command = Callable[[int], list[str]]
BEFORE = "before: "  # the name of a measure of the code before a change (--before)


def timed(command: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and the CPU seconds (user + system) the command's process used."""
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=environment, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - started, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(
    commands: dict[str, Command], runs: int, environment: dict[str, str], before: str | None
) -> dict[str, tuple[float, float]]:
    """The median (wall, CPU) seconds of each command, the runs interleaved (run i of every command, then i + 1).

    CPU time hardly depends on what else the machine runs; on a shared machine it is the steadier number."""
    earlier = {**environment, "PYTHONPATH": os.pathsep.join(filter(None, [before, environment.get("PYTHONPATH")]))}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for run in range(runs + 1):
        for name, command in commands.items():
            seconds = timed(command(run), earlier if name.startswith(BEFORE) else environment)
            if run:  # the first round warms the page cache and the .pyc files
                times[name].append(seconds)
    return {
        name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for name, values in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--kuberaven", default=str(Path(sys.executable).with_name("kuberaven")))
    parser.add_argument("--before", help="source directories of the code before a change, first on PYTHONPATH")
    args = parser.parse_args()
    kubectl = shutil.which("kubectl")
    compile_trees(args.before)  # as installed code starts: with its bytecode (compiled.py says why)
    with tempfile.TemporaryDirectory(prefix="kuberaven-cli-bench-") as name:
        directory = Path(name)
        # No daemon's database and no per-user one: every command names its own.
        environment = {**os.environ, "XDG_DATA_HOME": str(directory / "data")}
        environment.pop("KUBERAVEN_DB", None)
        current = f"sqlite:///{directory / 'current.db'}"
        subprocess.run([args.kuberaven, "db", "upgrade", "--db", current], env=environment, check=True)
        commands: dict[str, Command] = {
            "python -c pass": lambda _: [sys.executable, "-c", "pass"],
            "kuberaven --help": lambda _: [args.kuberaven, "--help"],
            "kuberaven get Slice -o json": lambda _: [args.kuberaven, "get", "Slice", "-o", "json", "--db", current],
            "kuberaven get Slice -o json, fresh database": lambda run: [
                *(args.kuberaven, "get", "Slice", "-o", "json"),
                *("--db", f"sqlite:///{directory / f'fresh-{run}.db'}"),
            ],
        }
        if args.before:
            commands.update(
                {
                    f"{BEFORE}kuberaven --help": commands["kuberaven --help"],
                    f"{BEFORE}kuberaven get Slice -o json": commands["kuberaven get Slice -o json"],
                    f"{BEFORE}kuberaven get Slice -o json, fresh database": lambda run: [
                        *(args.kuberaven, "get", "Slice", "-o", "json"),
                        *("--db", f"sqlite:///{directory / f'before-fresh-{run}.db'}"),
                    ],
                }
            )
        if kubectl:
            commands["kubectl version --client"] = lambda _: [kubectl, "version", "--client"]
        medians = measure(commands, args.runs, environment, args.before)
    kubectl_times = medians.pop("kubectl version --client", None)
    baseline = kubectl_times[0] if kubectl_times else None
    rows = [
        (
            name,
            f"{seconds:.3f} s (CPU {cpu:.3f} s)",
            f"{baseline:.3f} s kubectl" if baseline else "no kubectl on PATH",
            f"{seconds / baseline:.1f}x" if baseline else "",
        )
        for name, (seconds, cpu) in medians.items()
    ]
    if kubectl_times:
        rows.append(("kubectl version --client", f"{kubectl_times[0]:.3f} s (CPU {kubectl_times[1]:.3f} s)", "", ""))
    print_table(rows)
    print(f"median of {args.runs} runs each, interleaved; kuberaven: {args.kuberaven}")


if __name__ == "__main__":
    main()
