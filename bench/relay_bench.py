"""The event relay beside a busy writer (issue 26): how soon the last row is in Kafka and marked sent.

No control plane: a real Kafka-protocol broker (Tansu) and a fresh SQLite
database per run. A writer thread in the same process writes N "created"
outbox rows as the inventory's cold start does, in batches of 500 (the
inventory's INSERT, payloads of the bench pods' size), each transaction
holding SQLite's write lock (and the GIL, as Python work does) for
``--hold`` seconds before it commits, then pausing ``--gap`` seconds; beside
it ``--others`` threads write short transactions as the network
translator's threads do (each holding the lock ``--other-hold`` seconds of
Python work, then a pause of a fifth of that); the relay runs in its thread
as the daemon runs it, woken on each commit. Per
run: the writer's time, then the time from the writer's last commit to every
row marked sent (what run_bench.py's "every created in Kafka" reads), the
relay's CPU seconds (its threads: the relay's and, where there is one, the
marks'), and the "sent" UPDATEs: how many and their seconds (waiting for
the lock included). ``--before PATH`` runs the same in a child whose
``PYTHONPATH`` starts with another checkout's ``src``, interleaved with this
code's runs.

    python bench/relay_bench.py [--pods 10000] [--repeat 3] [--hold 0.3] [--gap 0.1] [--others 3]
                                [--other-hold 0.05] [--before ../other/src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from common import print_table

BATCH = 500
SENT_UPDATE = "UPDATE event_outbox SET sent"


def _rows(start: int, count: int) -> list[dict[str, Any]]:
    """Outbox rows as the inventory writes them (pods.py: the payload encoded once, as text)."""
    from kuberaven.events.schema import event_ids, event_time, pod_event
    from kuberaven.inventory.rows import encode_json

    rows, now, stamp = [], time.time(), event_time()
    for i, event_id in zip(range(start, start + count), event_ids(count), strict=True):
        observed = {
            "uid": f"uid-{i}",
            "labels": {"app": f"app-{i % 50}", "tier": "web", "xos_service": "bench"},
            "pod_ips": [f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"],
            "phase": "Running",
            "node": "node-1",
            "ready": True,
            "containers": [{"name": "c", "image": "nginx:1.25", "ready": True, "restart_count": 0}],
            "resource_version": str(i),
        }
        event = pod_event("created", cluster="default", namespace="bench", name=f"pod-{i}", observed=observed)
        event = {**event, "event_id": event_id, "time": stamp}
        row = {"event_id": event_id, "cluster": "default", "key": f"bench/pod-{i}", "status": "created"}
        rows.append({**row, "payload_json": encode_json(event), "created": now, "attempts": 0})
    return rows


def _busy(seconds: float) -> None:
    """Python work for ``seconds``: holds the GIL as a batch's per-pod work does (switching every 5 ms)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _unsent(engine: sa.Engine) -> int:
    with engine.connect() as db:
        return int(db.execute(sa.text("SELECT count(*) FROM event_outbox WHERE sent IS NULL")).scalar_one())


def _cpu(threads: list[threading.Thread]) -> float:
    return sum(time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in threads if t.ident and t.is_alive())


def _other_writer(engine: sa.Engine, hold: float, stop: threading.Event) -> None:
    """A translator-like writer: short transactions that take the write lock, Python work inside."""
    while not stop.is_set():
        with engine.begin() as db:
            db.execute(sa.text("UPDATE event_outbox SET attempts = attempts WHERE id < 0"))
            _busy(hold)
        stop.wait(hold / 5)


def run_once(args: argparse.Namespace, bootstrap: str) -> dict[str, float]:
    """One run in this process (a child of main()): the writer, the relay, the numbers."""
    from kuberaven.events.options import RelayOptions
    from kuberaven.events.relay import OutboxRelay
    from kuberaven.inventory.pods import _outbox_insert
    from kuberaven.model.database import Database

    directory = tempfile.mkdtemp(prefix="relay-bench-")
    database = Database(f"sqlite:///{directory}/bench.db")
    database.prepare()
    marks: list[float] = []

    def before(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith(SENT_UPDATE):
            conn.info["sent_started"] = time.perf_counter()

    def after(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith(SENT_UPDATE):
            marks.append(time.perf_counter() - conn.info.pop("sent_started"))

    sa.event.listen(database.engine, "before_cursor_execute", before)
    sa.event.listen(database.engine, "after_cursor_execute", after)
    pods, hold, gap = args.pods, args.hold, args.gap
    batches = [_rows(start, min(BATCH, pods - start)) for start in range(0, pods, BATCH)]
    stop = threading.Event()
    others = [
        threading.Thread(target=_other_writer, args=(database.engine, args.other_hold, stop))
        for _ in range(args.others)
    ]
    relay = OutboxRelay(database, RelayOptions(kafka=bootstrap, topic=f"relay-bench-{time.time_ns()}"))
    thread = threading.Thread(target=relay.run, name="relay")
    thread.start()
    while not relay.topic_ready:
        time.sleep(0.01)
    for other in others:
        other.start()
    started = time.perf_counter()
    for rows in batches:
        with database.engine.begin() as db:
            db.execute(_outbox_insert("sqlite"), rows)
            _busy(hold)
        relay.wake()
        time.sleep(gap)
    written = time.perf_counter()
    threads = [t for t in threading.enumerate() if t.name in ("relay", "outbox-marks")]
    while _unsent(database.engine):
        time.sleep(0.005)
    marked = time.perf_counter()
    cpu = _cpu(threads)
    stop.set()
    for other in others:
        other.join()
    relay.stop()
    thread.join(60)
    database.dispose()
    return {
        "writer": written - started,
        "tail": marked - written,
        "cpu": cpu,
        "marks": len(marks),
        "mark_seconds": sum(marks),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hold", type=float, default=0.3, help="seconds each writer transaction holds the lock")
    parser.add_argument("--gap", type=float, default=0.1, help="seconds between the writer's transactions")
    parser.add_argument("--others", type=int, default=3, help="translator-like writer threads beside it")
    parser.add_argument("--other-hold", type=float, default=0.05, help="seconds each of their transactions holds")
    parser.add_argument("--before", help="another checkout's src: its code's runs beside this code's")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a broker's bootstrap: run once, print JSON
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_once(args, args.child)))
        return
    from kuberaven.testing.broker import Broker

    broker = Broker(Path(tempfile.mkdtemp(prefix="relay-bench-broker-")))
    broker.start()
    sides = {"after": None, **({"before": args.before} if args.before else {})}
    results: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    try:
        for _ in range(args.repeat):
            for side, src in sides.items():
                results[side].append(_child(args, broker.bootstrap, src))
    finally:
        broker.stop()
    _print(args, results)


def _child(args: argparse.Namespace, bootstrap: str, src: str | None) -> dict[str, float]:
    environment = dict(os.environ)
    if src:
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [src, environment.get("PYTHONPATH")]))
    command = [sys.executable, __file__, "--pods", str(args.pods), "--hold", str(args.hold), "--gap", str(args.gap)]
    command += ["--others", str(args.others), "--other-hold", str(args.other_hold)]
    out = subprocess.run([*command, "--child", bootstrap], env=environment, check=True, capture_output=True)
    return dict(json.loads(out.stdout.decode().strip().splitlines()[-1]))


def _print(args: argparse.Namespace, results: dict[str, list[dict[str, float]]]) -> None:
    rows = []
    for measure, unit in (("writer", "s"), ("tail", "s"), ("cpu", "s"), ("marks", ""), ("mark_seconds", "s")):
        for side, runs in results.items():
            values = [run[measure] for run in runs]
            shown = ", ".join(f"{v:.2f}{unit}" if unit else f"{v:.0f}" for v in values)
            rows.append((f"{measure} ({side})", shown, f"median {statistics.median(values):.2f}", ""))
    print_table(rows)
    print(json.dumps({"arguments": {k: v for k, v in vars(args).items() if k != "child"}, "results": results}))


if __name__ == "__main__":
    main()
