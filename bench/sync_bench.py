"""Provisioning benchmark: N KubernetesServiceInstance rows at once → N Running pods, vs the raw limit.

Runs its own local control plane with the fake kubelet (2 nodes), and in one
invocation measures:

* raw: the same N pods (the manifests kuberaven builds) created directly with
  POSTs, ``--concurrency`` at a time (kuberaven's sync concurrency): time
  until all exist and until all are Running;
* kuberaven: N rows committed in one transaction on SQLite while a SyncLoop
  runs (as the daemon composes it, same concurrency): time from the commit
  until all pods exist and until all are Running;
* change latency: ``--changes`` ConfigMap rows edited one at a time; time from
  the commit to the watch showing the new data, vs the same edit sent as a
  direct PATCH.

Both sides are timed by one watch of the pods (or ConfigMaps) of their
namespace, opened before they start.

    python bench/sync_bench.py [--pods 1000] [--concurrency N (default: kuberaven's)] [--changes 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import statistics
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from common import percentile, print_table, run_in_testenv, watch_from_now
from kuberaven.kube.client import KubeClient
from kuberaven.model import (
    Database,
    Image,
    KubernetesConfigMap,
    KubernetesService,
    KubernetesServiceInstance,
    Site,
    Slice,
    TrustDomain,
    utcnow,
)
from kuberaven.provisioning import SyncLoop, SyncOptions
from kuberaven.provisioning.manifests import pod as pod_manifest
from kuberaven.testing.env import TestEnv
from kuberaven.testing.namespaces import create_namespace

Row = tuple[str, str, str, str]
IMAGE = ("registry.local:5000/library/pause", "3.2")


@contextlib.asynccontextmanager
async def watching(client: KubeClient, namespace: str, plural: str) -> AsyncIterator[dict[str, Any]]:
    """While the block runs: when each object was first seen, when each pod was Running, each ConfigMap's data."""
    seen: dict[str, Any] = {"added": {}, "running": {}, "data": {}}

    def record(obj: dict[str, Any]) -> None:
        name, now = obj["metadata"]["name"], time.monotonic()
        seen["added"].setdefault(name, now)
        if obj.get("status", {}).get("phase") == "Running":
            seen["running"].setdefault(name, now)
        if "data" in obj:
            seen["data"].setdefault((name, json.dumps(obj["data"], sort_keys=True)), now)

    async with watch_from_now(client, f"/api/v1/namespaces/{namespace}/{plural}", record):
        yield seen


async def until(predicate: Any, timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not met")
        await asyncio.sleep(0.02)
    return time.monotonic()


def _setup_rows(database: Database, namespace: str, pods: int) -> tuple[int, list[dict[str, Any]]]:
    """The trust domain, slice and image; returns the slice id and pod manifests like kuberaven's."""
    with database.session() as session:
        cluster = session.scalar(sa.select(KubernetesService))
        td = TrustDomain(name=namespace, owner=cluster)
        image = session.scalar(sa.select(Image)) or Image(name=IMAGE[0], tag=IMAGE[1])
        slice_ = Slice(name="bench", site=session.scalar(sa.select(Site)), trust_domain=td)
        session.add_all([td, image, slice_])
        session.flush()
        sample = KubernetesServiceInstance(name="x", slice=slice_, image=image, trust_domain=td, id=0)
        template = pod_manifest(sample)
        return slice_.id, [_renamed(template, f"pod-{i:04d}", "raw") for i in range(pods)]


def _renamed(template: dict[str, Any], name: str, namespace: str) -> dict[str, Any]:
    manifest = json.loads(json.dumps(template))
    manifest["metadata"].update(name=name, namespace=namespace)
    return manifest


async def raw_pods(client: KubeClient, manifests: list[dict[str, Any]], concurrency: int) -> tuple[float, float]:
    await create_namespace(client, "raw")
    names = iter(manifests)
    async with watching(client, "raw", "pods") as seen:
        started = time.monotonic()

        async def writer() -> None:
            for manifest in names:
                await client.request("POST", "/api/v1/namespaces/raw/pods", body=manifest)

        await asyncio.gather(*(writer() for _ in range(concurrency)))
        exist = await until(lambda: len(seen["added"]) >= len(manifests))
        running = await until(lambda: len(seen["running"]) >= len(manifests))
    return exist - started, running - started


async def kuberaven_pods(client: KubeClient, database: Database, loop: SyncLoop, pods: int) -> tuple[float, float]:
    namespace = "synced"
    slice_id, _ = await asyncio.to_thread(_setup_rows, database, namespace, 0)
    await until(lambda: loop.ready())
    await asyncio.sleep(1.5)  # the namespace is created and its token given before the clock starts
    async with watching(client, namespace, "pods") as seen:

        def insert() -> None:
            with database.session() as session:
                slice_ = session.get(Slice, slice_id)
                assert slice_ is not None
                image = session.scalar(sa.select(Image))
                td = slice_.trust_domain
                for i in range(pods):
                    row = KubernetesServiceInstance(name=f"pod-{i:04d}", slice=slice_, image=image, trust_domain=td)
                    row.owner = td.owner
                    session.add(row)

        started = time.monotonic()
        await asyncio.to_thread(insert)
        loop.wake()
        exist = await until(lambda: len(seen["added"]) >= pods)
        running = await until(lambda: len(seen["running"]) >= pods)
    return exist - started, running - started


async def change_latency(client: KubeClient, database: Database, changes: int) -> tuple[list[float], list[float]]:
    """Row edit → ConfigMap data in the watch, vs a direct PATCH → the watch."""
    namespace = "synced"
    with database.session() as session:
        td = session.scalar(sa.select(TrustDomain).where(TrustDomain.name == namespace))
        session.add(KubernetesConfigMap(name="knob", trust_domain=td, data={"v": "0"}))
    await asyncio.sleep(2)
    await create_namespace(client, "rawcm")
    await client.request("POST", "/api/v1/namespaces/rawcm/configmaps", body={"metadata": {"name": "knob"}, "data": {}})
    ours, raw = [], []
    async with watching(client, namespace, "configmaps") as seen, watching(client, "rawcm", "configmaps") as base:
        for i in range(1, changes + 1):
            data = {"v": str(i)}
            key = ("knob", json.dumps(data, sort_keys=True))
            changed = time.monotonic()
            with database.session() as session:
                session.execute(
                    sa.update(KubernetesConfigMap)
                    .where(KubernetesConfigMap.name == "knob")
                    .values(data=data, updated=utcnow())
                )
            ours.append(await until(lambda key=key: key in seen["data"]) - changed)
            patched = time.monotonic()
            await client.request(
                "PATCH",
                "/api/v1/namespaces/rawcm/configmaps/knob",
                body={"data": data},
                content_type="application/merge-patch+json",
            )
            raw.append(await until(lambda key=key: key in base["data"]) - patched)
            await asyncio.sleep(0.1)
    return ours, raw


async def run(args: argparse.Namespace, env: TestEnv, directory: Path) -> list[Row]:
    client = KubeClient.from_kubeconfig(env.control_plane.kubeconfig)
    database = Database(f"sqlite:///{directory}/kuberaven.db")
    database.prepare()
    options = SyncOptions(concurrency=args.concurrency, resync_period=3600)
    loop = SyncLoop(client, database, "kubernetes", options)
    task = asyncio.create_task(loop.run())
    try:
        _, manifests = await asyncio.to_thread(_setup_rows, database, "template", args.pods)
        raw_exist, raw_running = await raw_pods(client, manifests, args.concurrency)
        exist, running = await kuberaven_pods(client, database, loop, args.pods)
        ours, raw = await change_latency(client, database, args.changes)
    finally:
        loop.stop()
        await task
        await client.close()
        database.dispose()
    n = args.pods
    return [
        (f"{n} pods exist", f"{exist:.2f} s", f"{raw_exist:.2f} s", f"{exist / raw_exist:.2f}x"),
        (f"{n} pods Running", f"{running:.2f} s", f"{raw_running:.2f} s", f"{running / raw_running:.2f}x"),
        (
            "row change → applied p50",
            f"{percentile(ours, 0.5):.0f} ms",
            f"{percentile(raw, 0.5):.0f} ms",
            f"{statistics.median(ours) / statistics.median(raw):.1f}x",
        ),
        ("row change → applied p99", f"{percentile(ours, 0.99):.0f} ms", f"{percentile(raw, 0.99):.0f} ms", ""),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=SyncOptions.concurrency)
    parser.add_argument("--changes", type=int, default=40)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print_table(run_in_testenv(run, args))
    print(json.dumps(vars(args)))


if __name__ == "__main__":
    main()
