"""What the machine allows by hand (bench/, for ovn_vif_bench.py): ports made and plugged, no kuberaven on the path.

    a namespace's network (translated by the running kuberaven) ──► ONE bulk POST of ``count`` ports bound to
    the node (openstacksdk) ──► each plugged at once as os-vif plugs it: a veth whose host end joins br-int
    with external_ids:iface-id=<port> ──► `ovs-vsctl wait-until … ovn-installed=true` per port

Returns, per port, seconds from the bulk request's start to ovn-installed (create + plug + bind) and from its
plug to ovn-installed (the data path alone), and the seconds the bulk request took (Neutron's own rate, idle).
Everything made is removed, on failure too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
import uuid
from typing import Any

from kuberaven.kube.client import KubeClient
from kuberaven.model.bootstrap import DEFAULT_CLUSTER
from kuberaven.network.annotations import ANNOTATION
from kuberaven.network.backend import pool_port_name
from kuberaven.testing.namespaces import create_namespace
from tests.datapath import DataPath, delete_netns

INSTALLED = "external_ids:ovn-installed=true"
WAIT = "60"  # seconds ovs-vsctl waits for ovn-installed
SETTLE = 10.0  # seconds without a pool port made before the baseline is measured


async def sh(*command: str) -> None:
    process = await asyncio.create_subprocess_exec(*command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {err.decode().strip()}")


async def network_of(kube: KubeClient, namespace: str) -> dict[str, Any]:
    """The namespace's network and subnet, from the annotation the translator writes on it."""
    for _ in range(600):
        found = await kube.request("GET", f"/api/v1/namespaces/{namespace}")
        text = (found["metadata"].get("annotations") or {}).get(ANNOTATION)
        if text and json.loads(text).get("subnet"):
            return dict(json.loads(text))
        await asyncio.sleep(0.2)
    raise TimeoutError(f"namespace {namespace} has no network")


def pool_port_ids(datapath: DataPath) -> set[str]:
    connection = datapath.connection()
    return {p.id for p in connection.network.ports(name=pool_port_name(DEFAULT_CLUSTER))}


async def settled(datapath: DataPath, still: float = SETTLE) -> int:
    """Once the pools made no port for ``still`` seconds (the prewarming of the namespaces that exist done):
    how many pooled ports there are. A baseline measured while Neutron still fills pools would be slowed."""
    count = len(pool_port_ids(datapath))
    while True:
        await asyncio.sleep(still)
        now = len(pool_port_ids(datapath))
        if now == count:
            return now
        count = now


async def raw_ports(
    datapath: DataPath, kube: KubeClient, namespace: str, count: int
) -> tuple[list[float], list[float], float]:
    await create_namespace(kube, namespace)
    network = await network_of(kube, namespace)
    await settled(datapath)  # the namespace's own pools (kuberaven prewarms them) made first
    connection = datapath.connection()
    node_netns, ovsdb = f"/run/netns/{datapath.openstack['node_netns']}", datapath.openstack["ovsdb"]
    tag = uuid.uuid4().hex[:6]
    body = {
        "network_id": network["network"],
        "fixed_ips": [{"subnet_id": network["subnet"]}],
        "binding_host_id": datapath.node,
        "port_security_enabled": False,
    }
    started = time.monotonic()
    ports = await asyncio.to_thread(lambda: list(connection.network.create_ports([dict(body) for _ in range(count)])))
    plugged_at = time.monotonic()
    sandboxes = [f"krvraw-{tag}-{i:03d}" for i in range(count)]
    hosts = [f"krvraw{tag}{i:03d}"[:15] for i in range(count)]

    async def plug(i: int) -> tuple[float, float]:
        port, sandbox, host = ports[i], sandboxes[i], hosts[i]
        await sh("ip", "netns", "add", sandbox)
        await sh(
            "nsenter",
            f"--net={node_netns}",
            "ip",
            "link",
            "add",
            host,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            f"/run/netns/{sandbox}",
        )
        await sh("ip", "-n", sandbox, "link", "set", "eth0", "address", port.mac_address, "up")
        await sh("nsenter", f"--net={node_netns}", "ip", "link", "set", host, "up")
        await sh(
            "ovs-vsctl", f"--db={ovsdb}", "add-port", "br-int", host, "--", "set", "Interface", host,
            f"external_ids:iface-id={port.id}", f"external_ids:attached-mac={port.mac_address}",
        )  # fmt: skip
        await sh("ovs-vsctl", f"--db={ovsdb}", f"--timeout={WAIT}", "wait-until", "Interface", host, INSTALLED)
        installed = time.monotonic()
        return installed - started, installed - plugged_at

    try:
        measured = await asyncio.gather(*(plug(i) for i in range(count)))
    finally:
        for host in hosts:
            with contextlib.suppress(RuntimeError):
                await sh("ovs-vsctl", f"--db={ovsdb}", "--if-exists", "del-port", host)
        delete_netns(sandboxes)
        for port in ports:
            await asyncio.to_thread(connection.network.delete_port, port, ignore_missing=True)
    return [made for made, _ in measured], [plugged for _, plugged in measured], plugged_at - started
