"""The inventory's writes alone, beside a bare executemany of the same rows (issue 26).

No control plane, no broker, no other writer: N bench pods (bench/common.py's
``pod()``, bare, Running with an IP) and their namespace, service account and
config map go through ``InventoryWriter.apply`` in batches of the inventory's
size on a fresh SQLite database, in this process; the sum of the batches'
wall time stands beside run_bench.py's baseline, one executemany per table of
the very pod and outbox rows written, into a copy of the database. With
nothing else writing, what this measures is the writer's own cost (CPU and
SQLite), not waiting for the write lock; run_bench.py's row of the same name
adds that wait. ``--updates`` applies every pod once more as MODIFIED (a new
resourceVersion and label): the churn's path.

    python bench/writes_bench.py [--pods 3000] [--batch 500] [--repeat 5] [--updates]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import NAMESPACE, pod, print_table
from kuberaven.inventory.records import Item
from kuberaven.inventory.writer import InventoryWriter
from kuberaven.kube.reflector import WatchEvent
from kuberaven.model.database import Database
from run_bench import bare_executemany


def _event(kind: str, obj: dict[str, Any], namespace: str | None, uid: str, rv: int) -> WatchEvent:
    obj["metadata"].update(uid=uid, resourceVersion=str(rv), **({"namespace": namespace} if namespace else {}))
    return WatchEvent(kind, obj)


def _running(i: int, rv: int, kind: str = "ADDED") -> Item:
    obj = pod(i)
    obj["status"] = {"phase": "Running", "podIP": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", "hostIP": "10.0.0.1"}
    if kind == "MODIFIED":
        obj["metadata"]["labels"]["round"] = str(rv)
    return Item.of("pods", _event(kind, obj, NAMESPACE, f"uid-{i}", rv), str(rv))


def items(pods: int) -> list[Item]:
    """What a cold start's initial lists queue: the namespace, its service account and config map, the pods."""
    first = [
        Item.of(
            "namespaces", _event("ADDED", {"kind": "Namespace", "metadata": {"name": NAMESPACE}}, None, "ns", 1), "1"
        ),
        Item.of(
            "serviceaccounts",
            _event("ADDED", {"kind": "ServiceAccount", "metadata": {"name": "default"}}, NAMESPACE, "sa", 2),
            "2",
        ),
        Item.of(
            "configmaps",
            _event(
                "ADDED",
                {"kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "x"}},
                NAMESPACE,
                "cm",
                3,
            ),
            "3",
        ),
    ]
    return first + [_running(i, 10 + i) for i in range(pods)]


def apply_all(writer: InventoryWriter, queue: list[Item], batch: int) -> tuple[float, float]:
    """(wall, CPU) seconds of the batches: on a busy machine, wall time also counts waiting for a core."""
    wall = cpu = 0.0
    for start in range(0, len(queue), batch):
        started, used = time.perf_counter(), time.thread_time()
        writer.apply(queue[start : start + batch])
        wall += time.perf_counter() - started
        cpu += time.thread_time() - used
    return wall, cpu


@dataclass
class Round:
    wall: float  # the writer's batches, summed
    cpu: float  # their thread CPU time
    bare: float  # bare executemany of the same pod and outbox rows
    bare_cpu: float
    rows: int
    updates: tuple[float, float] | None = None  # every pod MODIFIED once: (wall, CPU)


def one_round(directory: Path, args: argparse.Namespace) -> Round:
    path = directory / "writes.db"
    for old in directory.glob("writes.db*"):
        old.unlink()
    database = Database(f"sqlite:///{path}")
    database.prepare()
    try:
        writer = InventoryWriter(database, "kubernetes")
        writer.load()
        wall, cpu = apply_all(writer, items(args.pods), args.batch)
        database.dispose()  # its WAL checkpointed into the file bare_executemany() copies
        result = Round(wall, cpu, *bare_executemany(path, directory / "bare.db"))
        if args.updates:
            again = [_running(i, 10 + args.pods + i, "MODIFIED") for i in range(args.pods)]
            result.updates = apply_all(writer, again, args.batch)
        return result
    finally:
        database.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=500, help="items per batch (the inventory's batch_size)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--updates", action="store_true", help="then every pod once more as MODIFIED")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kuberaven-writes-") as tmp:
        rounds = [one_round(Path(tmp), args) for _ in range(args.repeat)]
    # Wall time: the median round. CPU time: the least, which a busy machine inflates least (caches, clocks).
    wall, bare = (statistics.median(getattr(r, name) for r in rounds) for name in ("wall", "bare"))
    cpu, bare_cpu = (min(getattr(r, name) for r in rounds) for name in ("cpu", "bare_cpu"))
    n = args.pods
    rows = [
        (
            f"{n} pods: the writer's batches vs bare executemany of its {rounds[0].rows} rows",
            f"{wall:.3f} s",
            f"{bare:.3f} s",
            f"{wall / bare:.1f}x",
        ),
        (f"{n} pods: the same, CPU time", f"{cpu:.3f} s", f"{bare_cpu:.3f} s", f"{cpu / bare_cpu:.1f}x"),
        (f"{n} pods: the writer per pod (wall, CPU)", f"{wall / n * 1e3:.3f} ms, {cpu / n * 1e3:.3f} ms", "", ""),
    ]
    if args.updates:
        up_wall = statistics.median(r.updates[0] for r in rounds if r.updates)
        up_cpu = statistics.median(r.updates[1] for r in rounds if r.updates)
        rows.append((f"{n} pods: every pod MODIFIED once (wall, CPU)", f"{up_wall:.3f} s, {up_cpu:.3f} s", "", ""))
    print_table(rows)


if __name__ == "__main__":
    main()
