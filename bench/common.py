"""What the benchmarks share: bench pods, the raw-list baseline, a paced load generator, the table, and the
OpenStack data path with `kuberaven run` on it.

The load generator runs in a process of its own (``python bench/common.py
--load …``) so its writers do not share the measured process's CPU time or
event loop. Each write stamps the time it was sent into the pod, as an
annotation or a label, so whoever sees the change can tell its latency.

    python bench/common.py --load KUBECONFIG --pods N --seconds S --writers W [--rate R] [--field labels]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx2 as httpx
import msgspec

from kuberaven.kube.client import KubeClient
from kuberaven.testing.broker import Broker
from kuberaven.testing.controlplane import ControlPlane
from kuberaven.testing.env import TestEnv
from kuberaven.testing.namespaces import create_namespace

if TYPE_CHECKING:
    from tests.datapath import DataPath

T = TypeVar("T")
# The OpenStack data path benches play the node's container runtime with the tests' own helpers
# (tests/datapath.py); `python bench/x.py` puts bench/ on sys.path, not the repository.
REPOSITORY = Path(__file__).resolve().parents[1]
if str(REPOSITORY) not in sys.path:
    sys.path.append(str(REPOSITORY))

NAMESPACE = "bench"
STAMP = "bench.kuberaven.io/stamp"
# A Node object with no kubelet behind it: the pods stay untouched, and the
# pod garbage collector (which deletes pods bound to missing nodes) leaves them.
NODE = "bench-node"
APPS = 50


def pod(i: int, owners: dict[int, dict] | None = None) -> dict:
    """A pod of realistic size (≈4 KB): labels, env, resources, ports; optionally owned by app ``i % APPS``."""
    metadata: dict = {
        "name": f"pod-{i:05d}",
        "labels": {"app": f"app-{i % APPS}", "tier": "bench", "pod-template-hash": "5d8f7c6b9"},
        "annotations": {STAMP: "0"},
    }
    if owners:
        metadata["ownerReferences"] = [owners[i % APPS]]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "nodeName": NODE,
            "containers": [
                {
                    "name": "main",
                    "image": f"registry.example:5000/team/app-{i % APPS}:1.{i % 7}",
                    "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(8)],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    "ports": [{"containerPort": 8080, "name": "http"}],
                }
            ],
        },
    }


async def create_namespace_and_node(client: KubeClient) -> None:
    await create_namespace(client, NAMESPACE)
    await client.request("POST", "/api/v1/nodes", body={"metadata": {"name": NODE}})


async def create_pods(client: KubeClient, count: int, writers: int, owners: dict[int, dict] | None = None) -> None:
    queue = iter(range(count))

    async def writer() -> None:
        for i in queue:
            await client.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod(i, owners))

    await asyncio.gather(*(writer() for _ in range(writers)))


async def start_pods(client: KubeClient, count: int, writers: int) -> None:
    """Play the kubelet of the bench Node: each pod Running with an IP (kuberaven announces a pod once it has one)."""
    queue = iter(range(count))

    async def writer() -> None:
        for i in queue:
            ip = f"10.{64 + i // 65536}.{i // 256 % 256}.{i % 256}"
            status = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "192.0.2.1"}
            await client.request(
                "PATCH",
                f"/api/v1/namespaces/{NAMESPACE}/pods/pod-{i:05d}/status",
                body={"status": status},
                content_type="application/merge-patch+json",
            )

    await asyncio.gather(*(writer() for _ in range(writers)))


async def raw_list(client: KubeClient) -> tuple[float, int]:
    """The raw limit: a bare paginated GET of the pods (500 per page) decoded with msgspec."""
    started = time.perf_counter()
    params = {"limit": 500}
    count = 0
    while True:
        response = await client.http.get(f"/api/v1/namespaces/{NAMESPACE}/pods", params=params, timeout=60)
        page = msgspec.json.decode(response.content)
        count += len(page["items"])
        if not page["metadata"].get("continue"):
            break
        params["continue"] = page["metadata"]["continue"]
    return time.perf_counter() - started, count


def stamp_of(pod_object: dict, field: str) -> float | None:
    value = (pod_object.get("metadata", {}).get(field) or {}).get(STAMP)
    return float(value) if value and value != "0" else None


# --- the load generator -------------------------------------------------------


async def patch_load(client: KubeClient, pods: int, seconds: float, writers: int, rate: float, field: str) -> int:
    """Patch pods round-robin for ``seconds``: at ``rate`` writes/s, or as fast as the API server takes them (0)."""
    started = time.monotonic()
    deadline = started + seconds
    next_write = 0
    done = 0

    async def writer() -> None:
        nonlocal next_write, done
        while True:
            k, next_write = next_write, next_write + 1
            if rate:
                await asyncio.sleep(max(0.0, started + k / rate - time.monotonic()))
            if time.monotonic() >= deadline:
                return
            body = {"metadata": {field: {STAMP: repr(time.time())}}}
            await client.request(
                "PATCH",
                f"/api/v1/namespaces/{NAMESPACE}/pods/pod-{k % pods:05d}",
                body=body,
                content_type="application/merge-patch+json",
            )
            done += 1

    await asyncio.gather(*(writer() for _ in range(writers)))
    return done


async def external_load(
    kubeconfig: Path, pods: int, seconds: float, writers: int, rate: float = 0, field: str = "annotations"
) -> int:
    """Run patch_load() in a child process; returns the number of writes made."""
    load = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--load",
        str(kubeconfig),
        "--pods",
        str(pods),
        "--seconds",
        str(seconds),
        "--writers",
        str(writers),
        "--rate",
        str(rate),
        "--field",
        field,
        stdout=asyncio.subprocess.PIPE,
    )
    output, _ = await load.communicate()
    return int(output.strip())


@contextlib.asynccontextmanager
async def bare_watch(client: KubeClient, field: str) -> AsyncIterator[dict]:
    """The baseline: while the block runs, stamp → line read on a bare watch stream of the pods."""
    listing = await client.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params={"limit": 1})
    rv = listing["metadata"]["resourceVersion"]
    seen: dict = {"lat": [], "last_event": 0.0}

    async def watch() -> None:
        params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        timeout = httpx.Timeout(10, read=None)
        async with client.stream(f"/api/v1/namespaces/{NAMESPACE}/pods", params, timeout) as response:
            async for line in response.aiter_lines():
                frame = msgspec.json.decode(line)
                stamp = stamp_of(frame["object"], field)
                if frame["type"] == "MODIFIED" and stamp:
                    seen["lat"].append(time.time() - stamp)
                    seen["last_event"] = time.monotonic()

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.5)
    try:
        yield seen
    finally:
        task.cancel()


async def bare_watch_latency(
    client: KubeClient,
    kubeconfig: Path,
    pods: int,
    seconds: float,
    writers: int,
    rate: float = 0,
    field: str = "annotations",
) -> dict:
    """The baseline alone: a bare watch stream under the load."""
    async with bare_watch(client, field) as seen:
        writes = await external_load(kubeconfig, pods, seconds, writers, rate, field)
        stopped = time.monotonic()
        await asyncio.sleep(3)
    drain = max(0.0, seen["last_event"] - stopped)
    return {"writes": writes, "handled": len(seen["lat"]), "lat": seen["lat"], "drain": drain}


# --- reporting ------------------------------------------------------------------


@contextlib.asynccontextmanager
async def watch_from_now(client: KubeClient, path: str, on_object: Callable[[dict], None]) -> AsyncIterator[None]:
    """While the block runs, ``on_object`` gets each object a watch of ``path`` sees change from now on."""
    rv = (await client.request("GET", path, params={"limit": 1}))["metadata"]["resourceVersion"]

    async def watch() -> None:
        params = {"watch": "true", "resourceVersion": rv}
        async with client.stream(path, params, httpx.Timeout(10, read=None)) as response:
            async for line in response.aiter_lines():
                on_object(msgspec.json.decode(line)["object"])

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.3)
    try:
        yield
    finally:
        task.cancel()


def run_in_testenv(
    run: Callable[[argparse.Namespace, TestEnv, Path], Coroutine[Any, Any, T]], args: argparse.Namespace
) -> T:
    """``run(args, env, directory)`` against a local control plane of its own (2 fake nodes, no broker)."""
    with tempfile.TemporaryDirectory(prefix="kuberaven-bench-") as name:
        directory = Path(name)
        env = TestEnv(directory / "env", nodes=2, broker=False)
        env.start()
        try:
            return asyncio.run(run(args, env, directory))
        finally:
            env.stop()


def run_with_plane_and_broker(
    run: Callable[[argparse.Namespace, ControlPlane, Broker, Path], Coroutine[Any, Any, T]], args: argparse.Namespace
) -> T:
    """``run(args, plane, broker, directory)`` against a control plane and a Kafka-protocol broker of its own."""
    with tempfile.TemporaryDirectory(prefix="kuberaven-bench-") as name:
        directory = Path(name)
        plane, broker = ControlPlane(directory / "plane"), Broker(directory / "broker")
        plane.start()
        broker.start()
        try:
            return asyncio.run(run(args, plane, broker, directory))
        finally:
            broker.stop()
            plane.stop()


@contextlib.contextmanager
def openstack_datapath(keep_logs: Path | None = None) -> Iterator[DataPath]:
    """`kuberaven testenv up --openstack` (Neutron ML2/OVN, Octavia's ovn provider, the node's OVN chassis on
    Open vSwitch's userspace datapath) and `kuberaven run` on it as docs/network.md "Try the OpenStack half
    locally" says; on exit the daemon and the environment stop and their directory goes (its logs first copied
    to ``keep_logs``, if given: the daemon's, the node agent's, Neutron's and OVN's)."""
    from kuberaven.testing.env import down, up
    from kuberaven.testing.openstack import data_path_installed
    from tests.datapath import DataPath, daemon_environment
    from tests.helpers import daemon_running

    if os.geteuid() != 0:
        raise SystemExit("the OVN data path needs root (network namespaces, Open vSwitch)")
    if not data_path_installed():
        raise SystemExit("the OVN data path's Debian packages are not installed: make deps")
    directory = Path(tempfile.mkdtemp(prefix="kuberaven-bench-dp-"))
    try:
        described = up(directory, nodes=1, openstack=True)
        with contextlib.ExitStack() as daemons:

            def start() -> Any:
                kubeconfig = Path(described["kubeconfig"])
                environment = daemon_environment(described)
                return daemons.enter_context(
                    daemon_running(
                        kubeconfig, directory, "--network-backend", "openstack", env=environment, ready_within=240
                    )
                )

            yield DataPath(described, start(), start)
    finally:
        down(directory)
        if keep_logs is not None:
            shutil.copytree(directory, keep_logs, ignore=_not_logs, dirs_exist_ok=True)
        shutil.rmtree(directory, ignore_errors=True)


def _not_logs(folder: str, names: list[str]) -> list[str]:
    """What copytree leaves out of an environment's directory: everything but folders and log files (a restarted
    daemon's earlier logs among them: kuberaven-run.log.<n>)."""
    return [n for n in names if ".log" not in n and not (Path(folder) / n).is_dir()]


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of latencies in seconds, in milliseconds."""
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


def print_table(
    rows: Sequence[tuple[str, ...]], header: tuple[str, ...] = ("measure", "kuberaven", "baseline", "ratio")
) -> None:
    """``rows`` as aligned columns under ``header`` (each row as wide as it)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))


def _load_main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--load", required=True, help="kubeconfig")
    parser.add_argument("--pods", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--writers", type=int, required=True)
    parser.add_argument("--rate", type=float, default=0)
    parser.add_argument("--field", choices=("annotations", "labels"), default="annotations")
    args = parser.parse_args()

    async def main() -> int:
        client = KubeClient.from_kubeconfig(args.load)
        try:
            return await patch_load(client, args.pods, args.seconds, args.writers, args.rate, args.field)
        finally:
            await client.close()

    print(asyncio.run(main()))


if __name__ == "__main__":
    _load_main()
