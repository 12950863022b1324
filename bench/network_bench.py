"""Network translation benchmark: pod Running → port, Endpoints change → members, on both backends.

Runs its own local control plane (fake kubelet, 2 nodes) and, for the
``embedded`` backend (SQLite) and the ``openstack`` backend (a local Neutron
+ Octavia, testing/openstack.py), measures in one invocation:

* pod Running → port: ``--pods`` pods created 5 a second; from the moment a
  watch of the namespace sees a pod Running to the moment the translator
  stored its port (its NetworkTranslation row);
* Endpoints change → members: a Deployment behind a two-port Service scaled
  1 ↔ 2 ``--changes`` times; from the moment a watch sees the Endpoints with
  the new ready addresses to the moment the load balancer's members match;
* raw: the same backend calls made directly in the same run (one ensure_port
  per port; one create_member or delete_member per pool per change), which is
  the floor the translation adds watching, ordering and bookkeeping to.

    python bench/network_bench.py [--pods 40] [--changes 20] [--backends embedded,openstack]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from common import percentile, print_table, run_in_testenv, watch_from_now
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, NetworkTranslation
from kuberaven.network.backend import NetworkOptions, tags
from kuberaven.network.backends.embedded import EmbeddedBackend
from kuberaven.network.drivers import NetworkBackend
from kuberaven.network.drivers.ports import PortRequest
from kuberaven.network.translator import NetworkTranslator
from kuberaven.testing.env import TestEnv
from kuberaven.testing.namespaces import create_namespace
from kuberaven.testing.openstack import LocalOpenStack

PAUSE = "registry.local:5000/library/pause:3.2"
Row = tuple[str, str, str, str]


def rows(database: Database, cluster: str, kind: str, namespace: str) -> dict[str, NetworkTranslation]:
    with database.session() as session:
        found = session.scalars(
            sa.select(NetworkTranslation).where(
                NetworkTranslation.cluster == cluster,
                NetworkTranslation.kind == kind,
                NetworkTranslation.namespace == namespace,
            )
        )
        return {row.name: row for row in found}


async def until(predicate: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = await asyncio.to_thread(predicate)
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not met")
        await asyncio.sleep(0.01)


async def port_latency(client: KubeClient, database: Database, cluster: str, namespace: str, pods: int) -> list[float]:
    running: dict[str, float] = {}

    def on_pod(pod: dict[str, Any]) -> None:
        if pod.get("status", {}).get("phase") == "Running":
            running.setdefault(pod["metadata"]["name"], time.time())

    async with watch_from_now(client, f"/api/v1/namespaces/{namespace}/pods", on_pod):
        for i in range(pods):
            body = {"metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "c", "image": PAUSE}]}}
            await client.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)
            await asyncio.sleep(0.2)

        def all_ported() -> dict[str, NetworkTranslation] | None:
            found = rows(database, cluster, "Pod", namespace)
            return found if len(found) >= pods else None

        ported = await until(all_ported)
    return [ported[name].updated - running[name] for name in ported]


async def member_latency(
    client: KubeClient, database: Database, cluster: str, namespace: str, changes: int
) -> list[float]:
    labels = {"app": "echo"}
    deployment = {
        "metadata": {"name": "echo"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": PAUSE}]}},
        },
    }
    service = {
        "metadata": {"name": "echo"},
        "spec": {"selector": labels, "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]},
    }
    await client.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=deployment)
    await client.request("POST", f"/api/v1/namespaces/{namespace}/services", body=service)
    seen: dict[int, float] = {}  # ready addresses → when the watch first saw that many, since the last reset

    def on_endpoints(endpoints: dict[str, Any]) -> None:
        ready = sum(len(s.get("addresses") or []) for s in endpoints.get("subsets") or [])
        seen.setdefault(ready, time.time())

    def members(count: int) -> float | None:
        row = rows(database, cluster, "Service", namespace).get("echo")
        return row.updated if row is not None and row.state["members"] == 2 * count else None

    latencies = []
    async with watch_from_now(client, f"/api/v1/namespaces/{namespace}/endpoints", on_endpoints):
        await until(lambda: members(1))
        for i in range(changes):
            target = 2 if i % 2 == 0 else 1
            seen.clear()
            await client.request(
                "PATCH",
                f"/apis/apps/v1/namespaces/{namespace}/deployments/echo/scale",
                body={"spec": {"replicas": target}},
                content_type="application/merge-patch+json",
            )
            stored = await until(lambda target=target: members(target))
            await until(lambda target=target: target in seen)
            latencies.append(stored - seen[target])
    return latencies


def raw_calls(backend: NetworkBackend, cluster: str, pods: int, changes: int) -> tuple[list[float], list[float]]:
    """The backend calls the translation makes, made directly: ports, then member adds and removes."""
    options = NetworkOptions(external_cidr="172.31.0.0/24")
    infra = backend.ensure_infrastructure(f"{cluster}-raw", options)
    marks = tags(f"{cluster}-raw", "raw")
    network = backend.ensure_network("raw", marks)
    subnet = backend.ensure_subnet(network, "raw", marks, cidr="10.128.0.0/9")
    ports = []
    for i in range(pods):
        started = time.perf_counter()
        backend.ensure_port(PortRequest(network, subnet.id, f"raw/p{i}", f"raw-{i}", f"10.250.0.{i + 2}", [], marks))
        ports.append(time.perf_counter() - started)
    lb = backend.ensure_load_balancer("raw/echo", infra.service_subnet, "10.0.0.250", marks)
    pools = [backend.create_listener(lb.id, f"raw/echo:TCP:{p}", "TCP", p, marks).pool or "" for p in (80, 81)]
    member_changes = []
    added: list[str] = []
    for i in range(changes):
        started = time.perf_counter()
        if i % 2 == 0:
            added = [backend.create_member(lb.id, pool, "raw", "10.250.1.1", 80, subnet.id, marks).id for pool in pools]
        else:
            for pool, member in zip(pools, added, strict=True):
                backend.delete_member(lb.id, pool, member)
        member_changes.append(time.perf_counter() - started)
    return ports, member_changes


async def measure(
    name: str, backend: NetworkBackend, client: KubeClient, database: Database, args: argparse.Namespace
) -> list[Row]:
    cluster = f"bench-{name}"
    namespace = f"netbench-{name}"
    translator = NetworkTranslator(client, database, cluster, backend, gc_period=3600)
    task = asyncio.create_task(translator.run())
    try:
        await asyncio.wait_for(translator.collected.wait(), 120)
        await create_namespace(client, namespace)
        ports = await port_latency(client, database, cluster, namespace, args.pods)
        members = await member_latency(client, database, cluster, namespace, args.changes)
    finally:
        translator.stop()
        await task
    raw_ports, raw_members = await asyncio.to_thread(raw_calls, backend, cluster, args.pods, args.changes)

    def row(what: str, ours: list[float], raw: list[float]) -> Row:
        p50, raw50 = percentile(ours, 0.5), percentile(raw, 0.5)
        return (
            f"{name}: {what} p50 / p99",
            f"{p50:.0f} / {percentile(ours, 0.99):.0f} ms",
            f"{raw50:.0f} / {percentile(raw, 0.99):.0f} ms",
            f"{p50 / raw50:.1f}x",
        )

    return [row("pod Running → port", ports, raw_ports), row("Endpoints change → members", members, raw_members)]


async def run(args: argparse.Namespace, env: TestEnv, directory: Path) -> list[Row]:
    client = KubeClient.from_kubeconfig(env.control_plane.kubeconfig)
    database = Database(f"sqlite:///{directory}/kuberaven.db")
    database.prepare()
    table: list[Row] = []
    try:
        for name in args.backends.split(","):
            if name == "embedded":
                table += await measure(name, EmbeddedBackend(database), client, database, args)
                continue
            stack = LocalOpenStack(directory / "openstack")
            await asyncio.to_thread(stack.start)
            try:
                table += await measure(name, stack.backend(), client, database, args)
            finally:
                stack.stop()
    finally:
        await client.close()
        database.dispose()
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=40)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--backends", default="embedded,openstack")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print_table(run_in_testenv(run, args))  # baseline: the same backend calls made directly
    print(json.dumps(vars(args)))


if __name__ == "__main__":
    main()
