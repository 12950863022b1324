"""Raven engine benchmark: cold start, write→translate latency, memory.

Runs its own local control plane (no kubelet: pods are bound to a Node object
with nothing behind it, so nothing else touches them) and prints a table. Every
number is set beside a baseline measured in the same run:

* cold start: a no-op watcher receiving N existing pods, vs a bare paginated
  GET of the same pods decoded with msgspec (the raw limit);
* latency: pods patched as fast as the API server takes them, each patch
  stamping the time; p50/p99 of stamp→translate() vs stamp→line read on a
  bare watch stream; lag = time to drain once writes stop;
* peak RSS of a process that has synced N pods, vs the same process idle.

    python bench/watch_bench.py [--pods 10000] [--seconds 20] [--writers 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    NAMESPACE,
    bare_watch_latency,
    create_namespace_and_node,
    create_pods,
    external_load,
    percentile,
    print_table,
    raw_list,
    stamp_of,
)
from kuberaven.kube.client import KubeClient
from kuberaven.kube.reflector import WatchEvent
from kuberaven.testing.controlplane import ControlPlane
from kuberaven.watch.engine import Engine
from kuberaven.watch.watcher import Watcher, WatchTarget


async def engine_cold_start(client: KubeClient) -> tuple[float, int]:
    seen = 0

    async def noop(event: WatchEvent) -> None:
        nonlocal seen
        seen += 1

    engine = Engine(client, [Watcher(WatchTarget("v1", "Pod", namespace=NAMESPACE), noop, name="bench-noop")])
    started = time.perf_counter()
    task = asyncio.create_task(engine.run())
    await engine.wait_synced(timeout=300)
    elapsed = time.perf_counter() - started
    engine.stop()
    await task
    return elapsed, seen


async def engine_latency(client: KubeClient, kubeconfig: Path, pods: int, seconds: float, writers: int) -> dict:
    latencies: list[float] = []
    last_event = 0.0

    async def translate(event: WatchEvent) -> None:
        nonlocal last_event
        stamp = stamp_of(event.object, "annotations")
        if event.type == "MODIFIED" and stamp:
            latencies.append(time.time() - stamp)
            last_event = time.monotonic()

    engine = Engine(client, [Watcher(WatchTarget("v1", "Pod", namespace=NAMESPACE), translate, name="bench-lat")])
    task = asyncio.create_task(engine.run())
    await engine.wait_synced(timeout=300)
    latencies.clear()
    writes = await external_load(kubeconfig, pods, seconds, writers)
    stopped = time.monotonic()
    await engine.wait_idle(timeout=60)
    await asyncio.sleep(0.5)
    engine.stop()
    await task
    return {"writes": writes, "handled": len(latencies), "lat": latencies, "drain": max(0.0, last_event - stopped)}


def rss_child(kubeconfig: str, sync: bool) -> None:
    """Run in a subprocess: print peak RSS (MiB) after syncing the pods, or idle."""

    async def main() -> None:
        client = KubeClient.from_kubeconfig(kubeconfig)
        if sync:
            await engine_cold_start(client)
        await client.close()

    asyncio.run(main())
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def measure_rss(kubeconfig: Path, sync: bool) -> float:
    args = [sys.executable, __file__, "--rss-child", str(kubeconfig)] + (["--sync"] if sync else [])
    return float(subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip())


async def run(args: argparse.Namespace, plane: ControlPlane) -> list[tuple[str, str, str, str]]:
    client = KubeClient.from_kubeconfig(plane.kubeconfig)
    started = time.perf_counter()
    await create_namespace_and_node(client)
    await create_pods(client, args.pods, args.writers)
    create_rate = args.pods / (time.perf_counter() - started)
    rows = [("create pods (setup)", f"{create_rate:.0f}/s", "", "")]

    raw_times, engine_times = [], []
    for _ in range(args.repeat):
        elapsed, count = await raw_list(client)
        assert count == args.pods, count
        raw_times.append(elapsed)
        elapsed, seen = await engine_cold_start(client)
        assert seen >= args.pods, seen
        engine_times.append(elapsed)
    raw, ours = statistics.median(raw_times), statistics.median(engine_times)
    rows.append(
        (
            f"cold start, {args.pods} pods (median of {args.repeat})",
            f"{ours:.2f} s",
            f"{raw:.2f} s",
            f"{ours / raw:.2f}x",
        )
    )

    bare = await bare_watch_latency(client, plane.kubeconfig, args.pods, args.seconds, args.writers)
    mine = await engine_latency(client, plane.kubeconfig, args.pods, args.seconds, args.writers)
    rows.append(
        ("write rate (patches/s)", f"{mine['writes'] / args.seconds:.0f}", f"{bare['writes'] / args.seconds:.0f}", "")
    )
    rows.append(
        ("events handled / writes", f"{mine['handled']}/{mine['writes']}", f"{bare['handled']}/{bare['writes']}", "")
    )
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        ours_q, bare_q = percentile(mine["lat"], q), percentile(bare["lat"], q)
        rows.append((f"write→translate {label}", f"{ours_q:.1f} ms", f"{bare_q:.1f} ms", f"{ours_q / bare_q:.2f}x"))
    rows.append(("drain after writes stop", f"{mine['drain'] * 1000:.0f} ms", f"{bare['drain'] * 1000:.0f} ms", ""))
    await client.close()

    idle, synced = measure_rss(plane.kubeconfig, False), measure_rss(plane.kubeconfig, True)
    rows.append(
        (
            f"peak RSS with {args.pods} pods synced",
            f"{synced:.0f} MiB",
            f"{idle:.0f} MiB idle",
            f"+{synced - idle:.0f} MiB",
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)
    parser.add_argument("--sync", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child, args.sync)
        return
    with tempfile.TemporaryDirectory(prefix="kuberaven-bench-") as directory:
        plane = ControlPlane(Path(directory))
        plane.start()
        try:
            rows = asyncio.run(run(args, plane))
        finally:
            plane.stop()
    print_table(rows)
    print(json.dumps({"pods": args.pods, "seconds": args.seconds, "writers": args.writers}))


if __name__ == "__main__":
    main()
