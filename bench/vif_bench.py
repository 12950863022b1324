"""Ports before pods benchmark: a pod scheduled → its VIF annotation, beside the API server's own pod patch.

Runs its own local control plane and the network translator with
``cni=kuberaven`` on the embedded backend (SQLite). Pods are created already
bound to a Node that no kubelet serves (creation is their scheduling: they
stay without an IP, as they would until the CNI ran), ``--rate`` a second.
One watch of the namespace stamps when it first sees each pod, and when it
first sees the pod's ``kuberaven.io/vif`` annotation.

Baseline, in the same run and at the same rate: the bench patches a label of
one of ``BASE_PODS`` other pods (annotated before the run, so the translator
has nothing more to write on them), and measures the patch's round trip and
the time until a watch sees it. An annotation is such a patch: the second is
the floor under the first measure.

    python bench/vif_bench.py [--pods 500] [--rate 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import percentile, print_table, run_in_testenv, watch_from_now
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database
from kuberaven.network.backend import CNI_KUBERAVEN, NetworkOptions
from kuberaven.network.backends.embedded import EmbeddedBackend
from kuberaven.network.translator import NetworkTranslator
from kuberaven.network.vif import VIF_ANNOTATION
from kuberaven.testing.env import TestEnv
from kuberaven.testing.namespaces import create_namespace

PAUSE = "registry.local:5000/library/pause:3.2"
NAMESPACE, BASE = "vifbench", "vifbench-base"
NODE = "vifbench-node"
BASE_PODS = 20
STAMP = "bench-stamp"
Row = tuple[str, str, str, str]


def bound(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": PAUSE}]}}


async def until(predicate: Any, state: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"benchmark condition not met: {state()}")
        await asyncio.sleep(0.02)


class Seen:
    """What the watches saw, and when (time.time() on arrival)."""

    def __init__(self) -> None:
        self.scheduled: dict[str, float] = {}
        self.vif: dict[str, float] = {}
        self.stamps: dict[str, float] = {}

    def pod(self, pod: dict[str, Any]) -> None:
        meta, now = pod["metadata"], time.time()
        self.scheduled.setdefault(meta["name"], now)
        if VIF_ANNOTATION in (meta.get("annotations") or {}):
            self.vif.setdefault(meta["name"], now)

    def counts(self) -> str:
        return f"{len(self.scheduled)} pods seen, {len(self.vif)} with a VIF, {len(self.stamps)} patches seen"

    def base(self, pod: dict[str, Any]) -> None:
        stamp = (pod["metadata"].get("labels") or {}).get(STAMP)
        if stamp is not None:
            self.stamps.setdefault(stamp, time.time())


async def load(client: KubeClient, pods: int, rate: float, sent: dict[str, float], round_trips: list[float]) -> None:
    """Create the measured pods and patch the base pods, both at ``rate`` a second, each in its own task."""

    async def create(i: int) -> None:
        await client.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=bound(f"p{i:05d}"))

    async def patch(i: int) -> None:
        body = {"metadata": {"labels": {STAMP: str(i)}}}
        sent[str(i)] = time.time()
        started = time.perf_counter()
        await client.request(
            "PATCH",
            f"/api/v1/namespaces/{BASE}/pods/base-{i % BASE_PODS}",
            body=body,
            content_type="application/merge-patch+json",
        )
        round_trips.append(time.perf_counter() - started)

    started = time.monotonic()
    tasks = []
    for i in range(pods):
        await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
        tasks += [asyncio.create_task(create(i)), asyncio.create_task(patch(i))]
    await asyncio.gather(*tasks)


@dataclass
class Latencies:
    vif: list[float]  # scheduled → VIF annotation seen (s)
    patch_seen: list[float]  # the baseline: a pod PATCH sent → seen by a watch
    round_trips: list[float]  # the PATCH's own round trip


async def latencies(client: KubeClient, database: Database, args: argparse.Namespace) -> Latencies:
    """``args.pods`` pods at ``args.rate`` a second through the embedded backend's translator (in this process),
    beside the same number of pod patches (also used by bench/ovn_vif_bench.py as its baseline)."""
    # A /20 per namespace: --pods beyond a /24's 253 addresses would wait for addresses forever.
    options = NetworkOptions(cni=CNI_KUBERAVEN, subnet_mode="namespace", namespace_prefix=20)
    translator = NetworkTranslator(client, database, "vifbench", EmbeddedBackend(database), options, gc_period=3600)
    task = asyncio.create_task(translator.run())
    seen, sent, round_trips = Seen(), dict[str, float](), list[float]()
    try:
        await asyncio.wait_for(translator.collected.wait(), 120)
        await client.request("POST", "/api/v1/nodes", body={"metadata": {"name": NODE}})
        for namespace in (NAMESPACE, BASE):
            await create_namespace(client, namespace)
        async with watch_from_now(client, f"/api/v1/namespaces/{BASE}/pods", seen.pod):
            for i in range(BASE_PODS):
                await client.request("POST", f"/api/v1/namespaces/{BASE}/pods", body=bound(f"base-{i}"))
            await until(lambda: len(seen.vif) == BASE_PODS, seen.counts)
        watches = (
            watch_from_now(client, f"/api/v1/namespaces/{BASE}/pods", seen.base),
            watch_from_now(client, f"/api/v1/namespaces/{NAMESPACE}/pods", seen.pod),
        )
        seen.vif.clear()
        seen.scheduled.clear()
        async with watches[0], watches[1]:
            await load(client, args.pods, args.rate, sent, round_trips)
            await until(lambda: len(seen.vif) == args.pods and len(seen.stamps) == args.pods, seen.counts)
    finally:
        translator.stop()
        await task
    return Latencies(
        [seen.vif[name] - seen.scheduled[name] for name in seen.vif],
        [seen.stamps[stamp] - sent[stamp] for stamp in seen.stamps],
        round_trips,
    )


def ms(values: list[float]) -> str:
    """p50 / p99 of latencies in seconds."""
    return f"{percentile(values, 0.5):.0f} / {percentile(values, 0.99):.0f} ms"


async def measure(client: KubeClient, database: Database, args: argparse.Namespace) -> list[Row]:
    measured = await latencies(client, database, args)
    ratio = percentile(measured.vif, 0.5) / percentile(measured.patch_seen, 0.5)
    return [
        (
            f"scheduled → VIF seen, p50 / p99 ({args.rate:g} pods/s)",
            ms(measured.vif),
            ms(measured.patch_seen),
            f"{ratio:.1f}x",
        ),
        ("API server: pod PATCH round trip, p50 / p99", "", ms(measured.round_trips), ""),
    ]


async def run(args: argparse.Namespace, env: TestEnv, directory: Path) -> list[Row]:
    client = KubeClient.from_kubeconfig(env.control_plane.kubeconfig)
    database = Database(f"sqlite:///{directory}/kuberaven.db")
    database.prepare()
    try:
        return await measure(client, database, args)
    finally:
        await client.close()
        database.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print_table(run_in_testenv(run, args))  # baseline: a pod patch → seen by a watch, in the same run
    print(json.dumps(vars(args)))


if __name__ == "__main__":
    main()
