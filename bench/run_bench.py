"""`kuberaven run` start-up benchmark: time to ready on a large cluster, and what it logs meanwhile.

Runs its own local control plane, creates N pods bound to a Node with no
kubelet, and starts the whole daemon (`kuberaven run`: inventory, sync loop,
network translation, web server; SQLite, no Kafka) as a child process,
timing from its start to /readyz answering 200. Each number stands beside a
baseline measured in the same run:

* empty cluster: the daemon's fixed start-up cost (imports, schema, discovery);
* cold start on N pods (a new database: everything is listed and stored)
  vs a bare paginated GET of the same pods decoded with msgspec;
* restart on N pods (the database from the cold start: the watches resume
  from their stored positions, nothing is listed) vs the empty-cluster start.

It prints the progress lines the cold start logged, then the table.

    python bench/run_bench.py [--pods 10000] [--interval 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from common import create_namespace_and_node, create_pods, print_table, raw_list
from kuberaven.kube.client import KubeClient
from kuberaven.testing.controlplane import ControlPlane
from kuberaven.testing.processes import free_port

Row = tuple[str, str, str, str]


def time_to_ready(kubeconfig: Path, database: Path, log: Path, interval: float) -> float:
    """Seconds from starting `kuberaven run` to /readyz 200; the daemon is then stopped with SIGTERM."""
    listen = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "KUBERAVEN_PROGRESS_INTERVAL": str(interval), "KUBERAVEN_DB": f"sqlite:///{database}"}
    command = [sys.executable, "-m", "kuberaven", "run", "--kubeconfig", str(kubeconfig), "--listen", listen]
    started = time.perf_counter()
    with log.open("wb") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        while not _ready(f"http://{listen}/readyz"):
            if process.poll() is not None:
                raise SystemExit(f"kuberaven run exited with {process.returncode}: {log.read_text()}")
            time.sleep(0.05)
        ready = time.perf_counter() - started
        # The summary line follows readiness within the reporter's next look (0.2 s).
        deadline = time.monotonic() + 5
        while "initial sync done" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        return ready
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def sync_lines(log: Path) -> list[str]:
    return [line.split(" ", 3)[-1] for line in log.read_text().splitlines() if "initial sync" in line]


async def prepare(kubeconfig: Path, pods: int, writers: int) -> tuple[float, float]:
    """Create the pods; return (pods created per second, seconds of the raw list)."""
    client = KubeClient.from_kubeconfig(kubeconfig)
    try:
        await create_namespace_and_node(client)
        started = time.perf_counter()
        await create_pods(client, pods, writers)
        rate = pods / (time.perf_counter() - started)
        raw, _ = await raw_list(client)
        return rate, raw
    finally:
        await client.close()


def run(args: argparse.Namespace, directory: Path, plane: ControlPlane) -> list[Row]:
    kubeconfig = plane.kubeconfig
    empty = time_to_ready(kubeconfig, directory / "empty.db", directory / "empty.log", args.interval)
    rate, raw = asyncio.run(prepare(kubeconfig, args.pods, args.writers))
    cold_log = directory / "cold.log"
    cold = time_to_ready(kubeconfig, directory / "k.db", cold_log, args.interval)
    warm = time_to_ready(kubeconfig, directory / "k.db", directory / "warm.log", args.interval)
    print("\n".join(sync_lines(cold_log)), end="\n\n")
    return [
        ("create pods (setup)", f"{rate:.0f}/s", "", ""),
        ("start → ready, empty cluster", f"{empty:.2f} s", "", ""),
        (f"cold start → ready, {args.pods} pods (vs raw list)", f"{cold:.2f} s", f"{raw:.2f} s", f"{cold / raw:.2f}x"),
        (f"restart → ready, {args.pods} pods (vs empty cluster)", f"{warm:.2f} s", f"{empty:.2f} s",
         f"{warm / empty:.2f}x"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--interval", type=float, default=2.0, help="progress_interval of the daemon")
    parser.add_argument("--writers", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kuberaven-bench-") as name:
        directory = Path(name)
        plane = ControlPlane(directory / "plane")
        plane.start()
        try:
            rows = run(args, directory, plane)
        finally:
            plane.stop()
    print_table(rows)
    print(json.dumps({"pods": args.pods, "interval": args.interval}))


if __name__ == "__main__":
    main()
