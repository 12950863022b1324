"""The whole daemon on a large cluster: `kuberaven run` as `make run` starts it, beside its baselines.

Runs its own local control plane with fake kubelets (every pod Running with an
IP) and a Kafka-protocol broker, creates N pods of realistic size, and runs
`kuberaven run --kafka …` (inventory, provisioning, network translation on
the embedded backend, web server; SQLite) as a child process. Each number
stands beside a baseline measured in the same run:

* raw: a child process that GETs the pods page by page (limit=500), decodes
  the JSON and bulk-inserts one row per pod into SQLite — the least any
  mirror of the pods must do (its time and peak RSS); on the empty cluster
  too, as the baseline of the daemon's start (spawn → /readyz);
* the inventory's writes: the wall time of its batches (the metric
  ``kuberaven_inventory_batch_seconds``) vs one bare ``executemany`` per table
  of the very rows it wrote per pod (pod rows, outbox events), into a copy of
  the empty cluster's database (the same schema, indexes and pragmas);
* cold start (new database) → every pod's "created" acknowledged by Kafka,
  and → idle (/readyz 200, nothing queued, every pod's port in the network
  model), vs raw; the daemon's peak RSS vs raw's, and its RSS once idle;
* restart on the same database → /readyz 200 vs the empty-cluster start,
  with the events written again (must be 0) and the LISTs made;
* with ``--more M``: M pods in all, a cold start again: peak RSS, and RSS once idle, vs N pods'.

The measured code's bytecode is written first (compiled.py), as an
installation has it: the ``kuberaven`` this process imports and every
directory on PYTHONPATH (which puts another checkout's code first).

    python bench/run_bench.py [--pods 10000] [--more 30000] [--nodes 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import NAMESPACE, pod, print_table
from compiled import compile_trees
from kuberaven.kube.client import KubeClient
from kuberaven.testing.env import TestEnv
from kuberaven.testing.free_ports import free_port
from kuberaven.testing.namespaces import create_namespace

Row = tuple[str, str, str, str]
POLL = 0.2


# --- the cluster --------------------------------------------------------------


async def create_pods(kubeconfig: Path, start: int, stop: int, nodes: list[str], writers: int = 32) -> float:
    """Create pods ``start``..``stop`` bound to the fake nodes; wait until all have an IP. Returns pods/s."""
    client = KubeClient.from_kubeconfig(kubeconfig)
    try:
        if start == 0:
            await create_namespace(client, NAMESPACE)
        numbers = iter(range(start, stop))

        async def writer() -> None:
            for i in numbers:
                body = pod(i)
                body["spec"]["nodeName"] = nodes[i % len(nodes)]
                await client.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=body)

        started = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        while await _pods_with_ip(client) < stop:  # noqa: ASYNC110 (polling the API server, not a local event)
            await asyncio.sleep(1)
        return (stop - start) / (time.perf_counter() - started)
    finally:
        await client.close()


async def _pods_with_ip(client: KubeClient) -> int:
    pods = client.list_objects(f"/api/v1/namespaces/{NAMESPACE}/pods")
    return sum([bool(p["status"].get("podIP")) async for p in pods])


# --- the baseline: raw list + decode + SQLite bulk insert, in a process of its own ----------


def raw_baseline(kubeconfig: Path, database: Path) -> tuple[float, float]:
    """(seconds from spawn, peak RSS MiB) of raw_mirror.py in a child process."""
    command = [sys.executable, str(Path(__file__).with_name("raw_mirror.py")), str(kubeconfig), str(database)]
    started = time.perf_counter()
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    seconds = time.perf_counter() - started
    return seconds, json.loads(output)["peak_mib"]


# --- the daemon ---------------------------------------------------------------


@dataclass
class Run:
    """What one `kuberaven run` took, seen from outside."""

    ready: float | None = None
    all_sent: float | None = None
    idle: float | None = None
    peak_mib: float = 0.0
    idle_mib: float = 0.0
    events: int = 0
    relists: dict[str, float] = field(default_factory=dict)
    batch_seconds: float = 0.0


class Daemon:
    def __init__(self, env: TestEnv, database: Path, log: Path, pythonpath: str | None = None) -> None:
        self.database = database
        self.listen = f"127.0.0.1:{free_port()}"
        assert env.broker is not None
        command = [
            sys.executable,
            "-m",
            "kuberaven",
            "run",
            "--kubeconfig",
            str(env.control_plane.kubeconfig),
            "--listen",
            self.listen,
            "--kafka",
            env.broker.bootstrap,
        ]
        topic = f"bench-{time.time_ns()}"
        environment = {**os.environ, "KUBERAVEN_DB": f"sqlite:///{database}", "KUBERAVEN_TOPIC": topic}
        if pythonpath:  # other code first (startup_bench.py --before)
            environment["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, os.environ.get("PYTHONPATH")]))
        self.started = time.perf_counter()
        with log.open("wb") as sink:
            self.process = subprocess.Popen(command, env=environment, stdout=sink, stderr=subprocess.STDOUT)

    def readyz(self) -> tuple[int, dict[str, Any]]:
        try:
            with urllib.request.urlopen(f"http://{self.listen}/readyz", timeout=2) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)
        except (urllib.error.URLError, OSError, ValueError):
            return 0, {}

    def metrics(self) -> list[str]:
        with urllib.request.urlopen(f"http://{self.listen}/metrics", timeout=2) as response:
            return response.read().decode().splitlines()

    def relists(self, lines: list[str]) -> dict[str, float]:
        prefix = "kuberaven_relists_total{resource="
        return {
            line[len(prefix) + 1 :].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in lines
            if line.startswith(prefix)
        }

    def rss_mib(self, key: str = "VmRSS") -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)


def outbox_counts(database: Path) -> tuple[int, int, int]:
    """(events written, "created" events acknowledged by Kafka, pods with a port in the network model)."""
    try:
        db = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1)
        try:
            events = db.execute("select count(*) from event_outbox").fetchone()[0]
            sent = db.execute("select count(*) from event_outbox where status='created' and sent is not null")
            ports = db.execute("select count(*) from network_translation where kind='Pod'").fetchone()[0]
            return events, sent.fetchone()[0], ports
        finally:
            db.close()
    except sqlite3.Error:
        return 0, 0, 0  # the schema is not there yet


def run_daemon(
    env: TestEnv, database: Path, log: Path, pods: int, timeout: float = 900, pythonpath: str | None = None
) -> Run:
    """Start the daemon and watch it until idle (every created sent, every port made, nothing queued)."""
    daemon, result = Daemon(env, database, log, pythonpath), Run()
    try:
        while time.perf_counter() - daemon.started < timeout:
            code, body = daemon.readyz()
            now = time.perf_counter() - daemon.started
            if code == 200 and result.ready is None:
                result.ready = now
            _, sent, ports = outbox_counts(database)
            if sent >= pods and result.all_sent is None:
                result.all_sent = now
            queued = sum(w.get("queued") or 0 for w in body.get("watches", []))
            if code == 200 and result.all_sent is not None and ports >= pods and not queued:
                result.idle = now
                break
            if daemon.process.poll() is not None:
                raise SystemExit(f"kuberaven run exited with {daemon.process.returncode}; see {log}")
            time.sleep(POLL)
        time.sleep(3)  # settled: whatever is written now is written again, not new
        result.events = outbox_counts(database)[0]
        lines = daemon.metrics()
        result.relists = daemon.relists(lines)
        result.batch_seconds = sum(
            float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("kuberaven_inventory_batch_seconds_sum")
        )
        result.idle_mib = daemon.rss_mib()
        result.peak_mib = daemon.rss_mib("VmHWM")
        return result
    finally:
        daemon.stop()


# --- the inventory's writes beside a bare executemany of the same rows ----------------

PER_POD_TABLES = ("service_instance", "event_outbox")  # what the inventory writes for each pod


def bare_executemany(written: Path, copy: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, rows): the per-pod rows of ``written`` deleted from a copy of it, then inserted
    again with one executemany per table, with the daemon's pragmas, in one transaction (the same schema, indexes,
    triggers)."""
    copy.write_bytes(written.read_bytes())
    db = sqlite3.connect(copy, isolation_level=None)
    try:
        tables = {table: db.execute(f"select * from {table}").fetchall() for table in PER_POD_TABLES}
        for table in reversed(PER_POD_TABLES):
            db.execute(f"delete from {table}")
        db.execute("vacuum")
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
            db.execute(f"PRAGMA {pragma}")
        started, used = time.perf_counter(), time.thread_time()
        db.execute("begin")
        for table, rows in tables.items():
            if rows:
                db.executemany(f"insert into {table} values ({', '.join('?' * len(rows[0]))})", rows)
        db.execute("commit")
        return time.perf_counter() - started, time.thread_time() - used, sum(len(rows) for rows in tables.values())
    finally:
        db.close()


# --- the table ------------------------------------------------------------------


def ratio(value: float | None, baseline: float) -> str:
    return f"{value / baseline:.2f}x" if value is not None else "never"


def seconds(value: float | None) -> str:
    return f"{value:.2f} s" if value is not None else "never"


def measure(args: argparse.Namespace, env: TestEnv, directory: Path) -> list[Row]:
    kubeconfig = env.control_plane.kubeconfig
    nodes = sorted(env.kubelet.nodes) if env.kubelet else []
    raw_empty, _ = raw_baseline(kubeconfig, directory / "raw-empty.db")
    empty = run_daemon(env, directory / "empty.db", directory / "empty.log", 0)
    rate = asyncio.run(create_pods(kubeconfig, 0, args.pods, nodes))
    raw, raw_mib = raw_baseline(kubeconfig, directory / "raw.db")
    cold = run_daemon(env, directory / "cold.db", directory / "cold.log", args.pods)
    bare, _, bare_rows = bare_executemany(directory / "cold.db", directory / "bare.db")
    warm = run_daemon(env, directory / "cold.db", directory / "warm.log", args.pods)
    n = args.pods
    rows: list[Row] = [
        ("create pods with IPs (setup)", f"{rate:.0f}/s", "", ""),
        (
            "empty cluster, fresh database: spawn → ready",
            seconds(empty.ready),
            f"{raw_empty:.2f} s raw",
            ratio(empty.ready, raw_empty),
        ),
        ("empty cluster: idle RSS", f"{empty.idle_mib:.0f} MiB", "", ""),
        (
            f"{n} pods: cold start → every created in Kafka",
            seconds(cold.all_sent),
            f"{raw:.2f} s raw",
            ratio(cold.all_sent, raw),
        ),
        (
            f"{n} pods: cold start → idle (every port made)",
            seconds(cold.idle),
            f"{raw:.2f} s raw",
            ratio(cold.idle, raw),
        ),
        (
            f"{n} pods: inventory's writes (sum of its batches) vs bare executemany of its {bare_rows} rows",
            seconds(cold.batch_seconds),
            seconds(bare),
            ratio(cold.batch_seconds, bare),
        ),
        (f"{n} pods: peak RSS", f"{cold.peak_mib:.0f} MiB", f"{raw_mib:.0f} MiB raw", ratio(cold.peak_mib, raw_mib)),
        (f"{n} pods: RSS once idle", f"{cold.idle_mib:.0f} MiB", "", ""),
        (
            f"{n} pods: restart → ready",
            seconds(warm.ready),
            f"{empty.ready or 0:.2f} s empty",
            ratio(warm.ready, empty.ready or 1),
        ),
        (
            f"{n} pods: restart: events written again, LISTs",
            f"{warm.events - cold.events}, {int(sum(warm.relists.values()))} ({', '.join(sorted(warm.relists))})",
            "0",
            "",
        ),
    ]
    if args.more:
        asyncio.run(create_pods(kubeconfig, args.pods, args.more, nodes))
        bigger = run_daemon(env, directory / "more.db", directory / "more.log", args.more)
        rows += [
            (f"{args.more} pods: cold start → idle", seconds(bigger.idle), "", ""),
            (
                f"{args.more} pods: peak RSS",
                f"{bigger.peak_mib:.0f} MiB",
                f"{cold.peak_mib:.0f} MiB at {n}",
                ratio(bigger.peak_mib, cold.peak_mib),
            ),
            (
                f"{args.more} pods: RSS once idle",
                f"{bigger.idle_mib:.0f} MiB",
                f"{cold.idle_mib:.0f} MiB at {n}",
                ratio(bigger.idle_mib, cold.idle_mib),
            ),
        ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--more", type=int, default=0, help="then this many pods in all: memory must not grow")
    parser.add_argument("--nodes", type=int, default=2)
    args = parser.parse_args()
    compile_trees(os.environ.get("PYTHONPATH"))  # as installed code starts: with its bytecode (compiled.py says why)
    with tempfile.TemporaryDirectory(prefix="kuberaven-bench-") as name:
        directory = Path(name)
        env = TestEnv(directory / "env", nodes=args.nodes)
        env.start()
        try:
            rows = measure(args, env, directory)
        finally:
            env.stop()
    print_table(rows)
    print(json.dumps({"pods": args.pods, "more": args.more, "nodes": args.nodes}))


if __name__ == "__main__":
    main()
