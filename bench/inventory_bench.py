"""Inventory + events benchmark: cold start to Kafka, write→Kafka latency under churn, memory.

Runs its own local control plane and Kafka-protocol broker (Tansu), creates
N pods bound to a Node with no kubelet (the bench sets each Running with an
IP, as a kubelet would; each owned by one of 50 ConfigMaps, so the owner
walk runs too), and prints a table. kuberaven runs in a child
process of its own, as the daemon composes it: Database (SQLite, WAL) →
Inventory → outbox → OutboxRelay → Kafka. Every number stands beside a
baseline measured in the same run:

* cold start: from Inventory start on an empty database to (a) the inventory
  of N pods committed and (b) their N "created" events acknowledged by Kafka
  (the topic's offsets are then checked from outside), vs a bare paginated
  GET of the same pods decoded with msgspec (the raw limit);
* churn, once per ``--rates`` value: a separate process patches pod labels at
  that rate (or as fast as the API server takes them), each patch stamping
  the time; p50/p99 of stamp → the "updated" event read from Kafka by a
  consumer, vs stamp → line read on a bare watch stream of the same writes
  at the same time (so both see the same CPU contention);
* peak RSS of the kuberaven process after the cold start and after the
  churn, vs the same process idle (imports + schema).

    python bench/inventory_bench.py [--pods 10000] [--repeat 3] [--rates 500,100] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import resource
import sqlite3
import statistics
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import OFFSET_END, Consumer, TopicPartition
from prometheus_client import REGISTRY

from common import (
    APPS,
    NAMESPACE,
    STAMP,
    bare_watch,
    create_namespace_and_node,
    create_pods,
    external_load,
    percentile,
    print_table,
    raw_list,
    run_with_plane_and_broker,
    start_pods,
)
from kuberaven.events.options import RelayOptions
from kuberaven.events.relay import OutboxRelay
from kuberaven.inventory.component import Inventory
from kuberaven.kube.client import KubeClient
from kuberaven.model.database import Database
from kuberaven.testing.broker import Broker, kafka_messages
from kuberaven.testing.controlplane import ControlPlane

Row = tuple[str, str, str, str]


# --- the kuberaven side (a child process) ---------------------------------------


def _published() -> float:
    return REGISTRY.get_sample_value("kuberaven_events_published_total") or 0.0


async def kuberaven_side(kubeconfig: str, db_url: str, bootstrap: str, topic: str, expected: int) -> None:
    """Print {"committed", "published"} seconds once ``expected`` events are in Kafka; on stdin EOF, peak RSS."""
    database = Database(db_url)
    database.prepare(kubeconfig)
    if expected:
        client = KubeClient.from_kubeconfig(kubeconfig)
        relay = OutboxRelay(database, RelayOptions(kafka=bootstrap, topic=topic))
        inventory = Inventory(client, database, on_commit=relay.wake)
        started = time.perf_counter()
        relay_thread = threading.Thread(target=relay.run, name="relay")
        relay_thread.start()
        task = asyncio.create_task(inventory.run())
        await inventory.wait_synced(timeout=600)
        committed = time.perf_counter() - started
        while _published() < expected:  # noqa: ASYNC110 - counted by the relay's thread
            await asyncio.sleep(0.005)
        published = time.perf_counter() - started
        print(json.dumps({"committed": committed, "published": published}), flush=True)
        await asyncio.to_thread(sys.stdin.read)
        inventory.stop()
        await task
        relay.stop()
        relay_thread.join()
        await client.close()
    else:
        print("{}", flush=True)
        await asyncio.to_thread(sys.stdin.read)
    database.dispose()
    print(json.dumps({"rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)


class KuberavenProcess:
    """The child running kuberaven_side(); stop() returns its peak RSS in MiB."""

    def __init__(self, plane: ControlPlane, broker: Broker, directory: Path, name: str, expected: int) -> None:
        self.args = [
            sys.executable,
            __file__,
            "--kuberaven-side",
            str(plane.kubeconfig),
            f"sqlite:///{directory / name}.db",
            broker.bootstrap,
            name,
            str(expected),
        ]
        self.topic = name
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> dict:
        self.process = await asyncio.create_subprocess_exec(
            *self.args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 900)
        if not line:
            raise RuntimeError("the kuberaven process exited before it was ready")
        return json.loads(line)

    async def stop(self) -> float:
        assert self.process is not None and self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        line = await asyncio.wait_for(self.process.stdout.readline(), 120)
        await self.process.wait()
        return json.loads(line)["rss_mib"]


# --- the consumer's view of Kafka ----------------------------------------------------


class LatencyConsumer:
    """Reads new events from the topic in a thread; records stamp → receipt of each "updated" event."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False, "fetch.wait.max.ms": 10}
        )
        partitions = self.consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self.consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in partitions])
        self.latencies: list[float] = []
        self.last_event = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-consumer")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self.consumer.poll(0.1)
            value = None if message is None or message.error() is not None else message.value()
            if value is None:  # nothing yet, an error, or a message without a value: not one of the relay's events
                continue
            event = json.loads(value)
            stamp = event["labels"].get(STAMP)
            if event["status"] == "updated" and stamp and stamp != "0":
                self.latencies.append(time.time() - float(stamp))
                self.last_event = time.monotonic()
        self.consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


async def kuberaven_latency(
    kubeconfig: Path, bootstrap: str, topic: str, args: argparse.Namespace, rate: float
) -> dict:
    consumer = LatencyConsumer(bootstrap, topic)
    await asyncio.sleep(1)  # the consumer resolves its end offsets before the first write
    writes = await external_load(kubeconfig, args.pods, args.seconds, args.writers, rate, "labels")
    stopped = time.monotonic()
    deadline = stopped + 30
    while len(consumer.latencies) < writes and time.monotonic() < deadline:  # noqa: ASYNC110 - a thread's count
        await asyncio.sleep(0.1)
    await asyncio.sleep(1)
    consumer.stop()
    return {
        "writes": writes,
        "handled": len(consumer.latencies),
        "lat": consumer.latencies,
        "drain": max(0.0, consumer.last_event - stopped),
    }


def outbox_event_ids(database: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(database)) as db:
        return {event_id for (event_id,) in db.execute("SELECT event_id FROM event_outbox")}


def outbox_stages(database: Path) -> dict[str, list[float]]:
    """Where the time went, from the churn's outbox: stamp → the inventory batch that wrote it, stamp → Kafka's ack."""
    written, acked = [], []
    with contextlib.closing(sqlite3.connect(database)) as db:
        for payload, created, sent in db.execute(
            "SELECT payload, created, sent FROM event_outbox WHERE status = 'updated'"
        ):
            stamp = json.loads(payload)["labels"].get(STAMP)
            if stamp and stamp != "0" and sent is not None:
                written.append(created - float(stamp))
                acked.append(sent - float(stamp))
    return {"written": written, "acked": acked}


# --- the run -----------------------------------------------------------------------


async def create_owners(client: KubeClient) -> dict[int, dict]:
    owners = {}
    for k in range(APPS):
        body = {"metadata": {"name": f"app-{k}"}, "data": {"role": "owner of bench pods"}}
        created = await client.request("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", body=body)
        owners[k] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": f"app-{k}",
            "uid": created["metadata"]["uid"],
            "controller": True,
        }
    return owners


async def cold_starts(
    client: KubeClient, plane: ControlPlane, broker: Broker, directory: Path, args: argparse.Namespace
) -> list[Row]:
    raw_times, committed, published, rss = [], [], [], []
    for attempt in range(args.repeat):
        elapsed, count = await raw_list(client)
        assert count == args.pods, count
        raw_times.append(elapsed)
        side = KuberavenProcess(plane, broker, directory, f"cold-{attempt}", args.pods)
        times = await side.start()
        rss.append(await side.stop())
        committed.append(times["committed"])
        published.append(times["published"])
        written = outbox_event_ids(directory / f"{side.topic}.db")
        assert len(written) >= args.pods, f"{len(written)} events in the outbox, expected {args.pods}"
        in_kafka = {
            json.loads(m.value())["event_id"] for m in kafka_messages(broker.bootstrap, side.topic, written, 60)
        }
        assert written <= in_kafka, f"{len(written - in_kafka)} of {len(written)} events missing from Kafka"
    raw = statistics.median(raw_times)
    label = f"{args.pods} pods (median of {args.repeat})"
    return [
        (
            f"cold start → inventory committed, {label}",
            f"{statistics.median(committed):.2f} s",
            f"{raw:.2f} s",
            f"{statistics.median(committed) / raw:.2f}x",
        ),
        (
            f"cold start → {args.pods} events in Kafka",
            f"{statistics.median(published):.2f} s",
            f"{raw:.2f} s",
            f"{statistics.median(published) / raw:.2f}x",
        ),
        ("peak RSS after cold start (max)", f"{max(rss):.0f} MiB", "", ""),
    ]


async def churn(
    client: KubeClient, plane: ControlPlane, broker: Broker, directory: Path, args: argparse.Namespace, rate: float
) -> list[Row]:
    name = f"churn-{rate:.0f}"
    side = KuberavenProcess(plane, broker, directory, name, args.pods)
    await side.start()
    # The baseline watches the same writes at the same time, under the same CPU contention.
    async with bare_watch(client, "labels") as bare:
        mine = await kuberaven_latency(plane.kubeconfig, broker.bootstrap, side.topic, args, rate)
    rss = await side.stop()
    stages = outbox_stages(directory / f"{name}.db")
    asked = f"{rate:.0f}/s asked" if rate else "unpaced"
    rows: list[Row] = [
        (f"CHURN, label patches/s ({asked})", f"{mine['writes'] / args.seconds:.0f}", "", ""),
        (
            "events / writes (baseline: watch events)",
            f"{mine['handled']}/{mine['writes']}",
            f"{len(bare['lat'])}/{mine['writes']}",
            "",
        ),
    ]
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        ours, baseline = percentile(mine["lat"], q), percentile(bare["lat"], q)
        rows.append(
            (
                f"write→Kafka event {label} (baseline: →watch)",
                f"{ours:.1f} ms",
                f"{baseline:.1f} ms",
                f"{ours / baseline:.2f}x",
            )
        )
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        rows.append((f"  of which write→inventory batch {label}", f"{percentile(stages['written'], q):.1f} ms", "", ""))
        rows.append((f"  of which write→Kafka ack {label}", f"{percentile(stages['acked'], q):.1f} ms", "", ""))
    rows.append(("drain after writes stop", f"{mine['drain'] * 1000:.0f} ms", "", ""))
    rows.append(("peak RSS after churn", f"{rss:.0f} MiB", "", ""))
    return rows


async def run(args: argparse.Namespace, plane: ControlPlane, broker: Broker, directory: Path) -> list[Row]:
    client = KubeClient.from_kubeconfig(plane.kubeconfig)
    try:
        started = time.perf_counter()
        await create_namespace_and_node(client)
        await create_pods(client, args.pods, args.writers, await create_owners(client))
        await start_pods(client, args.pods, args.writers)
        rows: list[Row] = [("create pods (setup)", f"{args.pods / (time.perf_counter() - started):.0f}/s", "", "")]
        idle = KuberavenProcess(plane, broker, directory, "idle", 0)
        await idle.start()
        idle_rss = await idle.stop()
        rows += await cold_starts(client, plane, broker, directory, args)
        for rate in args.rates:
            rows += await churn(client, plane, broker, directory, args, rate)
        rows.append(("peak RSS idle (imports + schema)", f"{idle_rss:.0f} MiB", "", ""))
        return rows
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--rates",
        type=lambda text: [float(r) for r in text.split(",")],
        default=[500.0, 100.0],
        help="label patches/s of each churn phase; 0: as fast as possible (default 500,100)",
    )
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--kuberaven-side", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.kuberaven_side:
        kubeconfig, db_url, bootstrap, topic, expected = args.kuberaven_side
        asyncio.run(kuberaven_side(kubeconfig, db_url, bootstrap, topic, int(expected)))
        return
    rows = run_with_plane_and_broker(run, args)
    print_table(rows)
    print(json.dumps({"pods": args.pods, "repeat": args.repeat, "rates": args.rates, "seconds": args.seconds}))


if __name__ == "__main__":
    main()
