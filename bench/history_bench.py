"""History (issue 27): the inventory with history recorded vs not, in the same run, on the same cluster.

Runs inventory_bench.py's set-up (its own control plane and Kafka-protocol
broker, N pods bound to a Node with no kubelet, set Running with an IP by
the bench), then for each variant, `history_enabled` on and off, a child
process running the inventory and the relay as the daemon composes them
(SQLite, WAL), alternating the two so that both see the same machine:

* cold start on an empty database → the inventory of N pods committed and
  their N "created" events in Kafka (median of ``--repeat``); on / off;
* churn, unpaced label patches for ``--seconds`` (every patch is a version
  when history is on): p50/p99 of patch → "updated" event read from Kafka;
  on / off;
* database growth per 1,000 pod changes (the file after a checkpoint,
  before and after the churn), with and without history, and the versions
  recorded;
* ``get KubernetesServiceInstance --at`` a time in the middle of the churn
  vs the same get of the present, on the database with history: the rows
  and their documents, as the CLI and REST make them (median of 5).

    python bench/history_bench.py [--pods 10000] [--repeat 3] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import sqlalchemy as sa

from common import (
    create_namespace_and_node,
    create_pods,
    percentile,
    print_table,
    run_with_plane_and_broker,
    start_pods,
)
from inventory_bench import KuberavenProcess, create_owners, kuberaven_latency, kuberaven_side
from kuberaven.kube.client import KubeClient
from kuberaven.model.asof import Snapshot, checked_time
from kuberaven.model.base import utcnow
from kuberaven.model.database import Database
from kuberaven.model.documents import to_document
from kuberaven.model.history import HISTORY, set_recording
from kuberaven.model.workloads import KubernetesServiceInstance
from kuberaven.testing.broker import Broker
from kuberaven.testing.controlplane import ControlPlane

Row = tuple[str, str, str, str]
VARIANTS = ("off", "on")
PODS_TABLE = "service_instance"


async def history_side(kubeconfig: str, db_url: str, bootstrap: str, topic: str, expected: int, on: bool) -> None:
    """inventory_bench's kuberaven side, on a database whose history recording is set first."""
    database = Database(db_url)
    database.prepare(kubeconfig)
    with database.engine.begin() as db:
        set_recording(db, on)
    database.dispose()
    await kuberaven_side(kubeconfig, db_url, bootstrap, topic, expected)


class HistoryProcess(KuberavenProcess):
    """inventory_bench's child process, running history_side() with recording on or off."""

    def __init__(self, plane: ControlPlane, broker: Broker, directory: Path, name: str, expected: int, on: bool):
        super().__init__(plane, broker, directory, name, expected)
        self.database = directory / f"{name}.db"
        self.args = [sys.executable, __file__, "--history-side", *self.args[3:], "on" if on else "off"]


def file_size(path: Path) -> int:
    """The database's size with its WAL folded in."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def versions_recorded(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return int(db.execute(f"SELECT count(*) FROM {HISTORY[PODS_TABLE].name}").fetchone()[0])


def ratio(on: float, off: float) -> str:
    return f"{on / off:.2f}x" if off else ""


async def cold_starts(plane: ControlPlane, broker: Broker, directory: Path, args: argparse.Namespace) -> list[Row]:
    times: dict[str, dict[str, list[float]]] = {v: {"committed": [], "published": []} for v in VARIANTS}
    for attempt in range(args.repeat):
        for variant in VARIANTS if attempt % 2 == 0 else reversed(VARIANTS):
            side = HistoryProcess(plane, broker, directory, f"cold-{variant}-{attempt}", args.pods, variant == "on")
            measured = await side.start()
            await side.stop()
            for stage in ("committed", "published"):
                times[variant][stage].append(measured[stage])
    rows: list[Row] = []
    for stage, what in (("committed", "inventory committed"), ("published", f"{args.pods} events in Kafka")):
        on, off = (statistics.median(times[v][stage]) for v in ("on", "off"))
        rows.append((f"cold start → {what}, {args.pods} pods", f"{on:.2f} s", f"{off:.2f} s", ratio(on, off)))
    return rows


async def churn_once(
    plane: ControlPlane, broker: Broker, directory: Path, args: argparse.Namespace, name: str, on: bool
) -> dict:
    side = HistoryProcess(plane, broker, directory, name, args.pods, on)
    await side.start()
    before = file_size(side.database)
    started = utcnow()
    measured = await kuberaven_latency(plane.kubeconfig, broker.bootstrap, side.topic, args, 0.0)
    measured["middle"] = started + (utcnow() - started) / 2
    await side.stop()
    measured["growth"] = file_size(side.database) - before
    measured["versions"] = versions_recorded(side.database)
    measured["database"] = side.database
    return measured


def pool(rounds: list[dict]) -> dict:
    """The rounds of one variant as one: latencies joined, counts summed."""
    pooled: dict = {"lat": [latency for r in rounds for latency in r["lat"]]}
    for key in ("writes", "handled", "growth", "versions"):
        pooled[key] = sum(r[key] for r in rounds)
    return pooled


async def churn(
    plane: ControlPlane, broker: Broker, directory: Path, args: argparse.Namespace
) -> tuple[list[Row], dict]:
    """Unpaced churn, ``repeat`` rounds per variant, alternating; latencies pooled per variant."""
    rounds: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for attempt in range(args.repeat):
        for variant in VARIANTS if attempt % 2 == 0 else reversed(VARIANTS):
            name = f"churn-{variant}-{attempt}"
            rounds[variant].append(await churn_once(plane, broker, directory, args, name, variant == "on"))
    pooled = {v: pool(rounds[v]) for v in VARIANTS}
    on, off = pooled["on"], pooled["off"]
    seconds = args.seconds * args.repeat
    rows: list[Row] = [
        ("CHURN, unpaced label patches/s", f"{on['writes'] / seconds:.0f}", f"{off['writes'] / seconds:.0f}", ""),
        ("events / writes", f"{on['handled']}/{on['writes']}", f"{off['handled']}/{off['writes']}", ""),
    ]
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        mine, baseline = percentile(on["lat"], q), percentile(off["lat"], q)
        rows.append((f"write→Kafka event {label}", f"{mine:.1f} ms", f"{baseline:.1f} ms", ratio(mine, baseline)))
    growth = {v: pooled[v]["growth"] / max(pooled[v]["writes"], 1) * 1000 / 1024 for v in VARIANTS}
    rows.append(("database growth per 1,000 pod changes", f"{growth['on']:.0f} KiB", f"{growth['off']:.0f} KiB", ""))
    rows.append(("versions recorded / label patches (history on)", f"{on['versions']}/{on['writes']}", "", ""))
    return rows, rounds["on"][-1]


def timed_get(database: Database, at: object | None) -> tuple[float, int]:
    """The seconds `get KubernetesServiceInstance -o json` takes to make its documents (now, or --at)."""
    started = time.perf_counter()
    with database.session() as session:
        if at is None:
            rows = list(session.scalars(sa.select(KubernetesServiceInstance).order_by(KubernetesServiceInstance.id)))
        else:
            connection = session.connection()
            rows = Snapshot(connection, checked_time(connection, at)).query(KubernetesServiceInstance)[1]  # type: ignore[arg-type]
        text = json.dumps([to_document(row) for row in rows], default=str)
    assert text
    return time.perf_counter() - started, len(rows)


def at_queries(path: Path, middle: object, pods: int) -> list[Row]:
    database = Database(f"sqlite:///{path}")
    try:
        present, at = [], []
        for _ in range(5):
            seconds, count = timed_get(database, None)
            present.append(seconds)
            assert count == pods, count
            seconds, count = timed_get(database, middle)
            at.append(seconds)
            assert count == pods, count
    finally:
        database.dispose()
    mine, baseline = statistics.median(at), statistics.median(present)
    return [(f"get --at (mid-churn) vs get, {pods} pods", f"{mine:.2f} s", f"{baseline:.2f} s", ratio(mine, baseline))]


async def run(args: argparse.Namespace, plane: ControlPlane, broker: Broker, directory: Path) -> list[Row]:
    client = KubeClient.from_kubeconfig(plane.kubeconfig)
    try:
        await create_namespace_and_node(client)
        await create_pods(client, args.pods, args.writers, await create_owners(client))
        await start_pods(client, args.pods, args.writers)
    finally:
        await client.close()
    rows = await cold_starts(plane, broker, directory, args)
    churn_rows, last_on = await churn(plane, broker, directory, args)
    return rows + churn_rows + at_queries(last_on["database"], last_on["middle"], args.pods)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--history-side", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.history_side:
        kubeconfig, db_url, bootstrap, topic, expected, on = args.history_side
        asyncio.run(history_side(kubeconfig, db_url, bootstrap, topic, int(expected), on == "on"))
        return
    rows = run_with_plane_and_broker(run, args)
    print("(value: history on; baseline: history off, same run)")
    print_table(rows)
    print(json.dumps({"pods": args.pods, "repeat": args.repeat, "seconds": args.seconds}))


if __name__ == "__main__":
    main()
