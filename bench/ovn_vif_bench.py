"""Pods on the OVN data path: scheduled → Neutron port ACTIVE → kuberaven-cni ADD returned, beside the embedded VIF.

Runs `kuberaven testenv up --openstack` (Neutron ML2/OVN, Octavia's ovn
provider, the node's OVN chassis on Open vSwitch's userspace datapath) and
`kuberaven run` on it as docs/network.md "Try the OpenStack half locally" says
(openstack backend, network_cni=kuberaven). ``--pods`` pods, bound to the
environment's node at creation (creation is their scheduling), are created
``--rate`` a second. The bench plays the node's container runtime: when its
watch first sees a pod's VIF annotation, it makes a network namespace and runs
kuberaven-cni ADD into it (``CNI_*`` environment, the environment's
``cni_config`` on stdin), which plugs the pod into br-int and returns once
Neutron reports the port ACTIVE. Stamps (time.time()): the watch first sees
the pod, then its VIF annotation; a listing of the ACTIVE ports every
``POLL`` s first shows its port; ADD returns (an ADD that gave up, the port
not ACTIVE within ``--active-timeout``, is counted). Every namespace is
deleted at the end, on failure too (`testenv down` removes br-int and the
OVS ports).

Baseline, in the same run and at the same rate, once `kuberaven run` has
stopped: bench/vif_bench.py's measure on the same control plane (the
embedded backend's translator in this process: scheduled → VIF annotation
seen, beside a pod PATCH seen by a watch).

    python bench/ovn_vif_bench.py [--pods 80] [--rate 20] [--active-timeout 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import openstack_datapath, percentile, print_table, watch_from_now
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database
from kuberaven.network.backends.openstack import DEVICE_OWNER
from kuberaven.network.vif import VIF_ANNOTATION, Vif
from kuberaven.testing.namespaces import create_namespace
from tests.datapath import SRC, DataPath, cni, delete_netns
from tests.helpers import PAUSE
from vif_bench import Latencies, Row, latencies, ms, until

NAMESPACE = "ovnvifbench"
POLL = 0.2  # seconds between two listings of the ACTIVE ports in Neutron
ADD_TIMEOUT = 600  # seconds for every ADD to have returned


class Runtime:
    """The node's container runtime, as far as the network goes: ADD into a netns of its own for each pod whose
    VIF it sees, with the stamps of what it saw."""

    def __init__(self, datapath: DataPath, active_timeout: float) -> None:
        self.datapath = datapath
        self.active_timeout = active_timeout
        self.scheduled: dict[str, float] = {}
        self.vif: dict[str, float] = {}
        self.ports: dict[str, str] = {}  # port id → pod
        self.active: dict[str, float] = {}  # pod → port first listed ACTIVE
        self.added: dict[str, float] = {}
        self.failed: dict[str, str] = {}
        self.sandboxes: list[str] = []
        self.tasks: list[asyncio.Task[None]] = []

    def pod(self, pod: dict[str, Any]) -> None:
        meta, now = pod["metadata"], time.time()
        name = meta["name"]
        self.scheduled.setdefault(name, now)
        text = (meta.get("annotations") or {}).get(VIF_ANNOTATION)
        if text is not None and name not in self.vif:
            self.vif[name] = now
            self.ports[Vif.from_json(text).port] = name
            self.tasks.append(asyncio.create_task(self.add(name)))

    async def add(self, name: str) -> None:
        sandbox = f"krvbench-{len(self.sandboxes):04d}-{int(time.time()) % 100000}"
        self.sandboxes.append(sandbox)
        made = await asyncio.create_subprocess_exec("ip", "netns", "add", sandbox)
        if await made.wait() != 0:
            self.failed[name] = f"ip netns add {sandbox} failed"
            return
        try:
            code, answer = await cni(self.datapath, "ADD", sandbox, NAMESPACE, name, activeTimeout=self.active_timeout)
        except Exception as error:  # e.g. output on stderr although it exited 0: counted, not lost in a task
            self.failed[name] = repr(error)
            return
        if code == 0:
            self.added[name] = time.time()
        else:
            self.failed[name] = f"ADD exited {code}: {answer}"

    def listed_active(self, ports: list[str]) -> None:
        now = time.time()
        for port in ports:
            pod = self.ports.get(port)
            if pod is not None:
                self.active.setdefault(pod, now)

    def counts(self) -> str:
        return (
            f"{len(self.scheduled)} pods seen, {len(self.vif)} with a VIF, {len(self.active)} ports ACTIVE, "
            f"{len(self.added)} ADD returned, {len(self.failed)} failed: {list(self.failed.values())[:3]}"
        )


async def poll_active(runtime: Runtime, stop: asyncio.Event) -> None:
    """List the kuberaven pods' ports that Neutron reports ACTIVE, every POLL s, until ``stop``."""
    connection = runtime.datapath.connection()

    def listing() -> list[str]:
        return [p.id for p in connection.network.ports(device_owner=DEVICE_OWNER, status="ACTIVE")]

    while not stop.is_set():
        runtime.listed_active(await asyncio.to_thread(listing))
        await asyncio.sleep(POLL)


async def create_pods(kube: KubeClient, node: str, pods: int, rate: float) -> None:
    """``pods`` pods bound to ``node`` at creation, ``rate`` a second, each POST in its own task."""

    async def create(i: int) -> None:
        body = {
            "metadata": {"name": f"p{i:04d}"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": PAUSE}]},
        }
        await kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=body)

    started, tasks = time.monotonic(), []
    for i in range(pods):
        await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
        tasks.append(asyncio.create_task(create(i)))
    await asyncio.gather(*tasks)


async def measure_ovn(datapath: DataPath, kube: KubeClient, args: argparse.Namespace) -> Runtime:
    runtime, stop = Runtime(datapath, args.active_timeout), asyncio.Event()
    await create_namespace(kube, NAMESPACE)
    poller = asyncio.create_task(poll_active(runtime, stop))
    try:
        async with watch_from_now(kube, f"/api/v1/namespaces/{NAMESPACE}/pods", runtime.pod):
            await create_pods(kube, datapath.node, args.pods, args.rate)
            await until(lambda: len(runtime.added) + len(runtime.failed) == args.pods, runtime.counts, ADD_TIMEOUT)
            await asyncio.gather(*runtime.tasks)
    finally:
        stop.set()
        await poller
        delete_netns(runtime.sandboxes)
    return runtime


def plugin_start_up() -> float:
    """kuberaven-cni VERSION: what the interpreter and the plugin's imports cost each ADD before any work."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kuberaven.cni.plugin"],
        env={"CNI_COMMAND": "VERSION", "PYTHONPATH": SRC},
        input=b"{}",
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - started


def rows_of(runtime: Runtime, embedded: Latencies, rate: float, start_up: float) -> list[Row]:
    def step(since: dict[str, float], to: dict[str, float]) -> list[float]:
        return [to[pod] - since[pod] for pod in to if pod in since]

    vif = step(runtime.scheduled, runtime.vif)
    ratio = percentile(vif, 0.5) / percentile(embedded.vif, 0.5)
    return [
        (
            f"scheduled → VIF seen, p50 / p99 ({rate:g} pods/s)",
            ms(vif),
            ms(embedded.vif) + " (embedded)",
            f"{ratio:.1f}x",
        ),
        ("scheduled → Neutron port ACTIVE", ms(step(runtime.scheduled, runtime.active)), "", ""),
        ("scheduled → CNI ADD returned", ms(step(runtime.scheduled, runtime.added)), "", ""),
        ("  VIF seen → ADD returned (plug, bind, ACTIVE)", ms(step(runtime.vif, runtime.added)), "", ""),
        ("  port ACTIVE → ADD returned", ms(step(runtime.active, runtime.added)), "", ""),
        ("kuberaven-cni VERSION alone (its start-up)", f"{start_up * 1000:.0f} ms", "", ""),
        ("ADD failed (port not ACTIVE within activeTimeout)", str(len(runtime.failed)), "", ""),
        ("embedded: pod PATCH → seen by a watch", "", ms(embedded.patch_seen), ""),
    ]


async def run(args: argparse.Namespace) -> list[Row]:
    with openstack_datapath() as datapath:
        kube = KubeClient.from_kubeconfig(datapath.env["kubeconfig"])
        try:
            start_up = plugin_start_up()
            runtime = await measure_ovn(datapath, kube, args)
            datapath.daemon.process.send_signal(signal.SIGTERM)  # the embedded translator alone from here
            datapath.daemon.process.wait(30)
            with tempfile.TemporaryDirectory(prefix="kuberaven-bench-") as name:
                database = Database(f"sqlite:///{Path(name)}/kuberaven.db")
                database.prepare()
                try:
                    embedded = await latencies(kube, database, args)
                finally:
                    database.dispose()
        finally:
            await kube.close()
    return rows_of(runtime, embedded, args.rate, start_up)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=80)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument(
        "--active-timeout",
        type=float,
        default=60.0,
        help="kuberaven-cni's activeTimeout (s): how long ADD waits for the port to be ACTIVE",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print_table(asyncio.run(run(args)))  # baseline: the embedded backend's VIF, in the same run
    print(json.dumps(vars(args)))


if __name__ == "__main__":
    main()
