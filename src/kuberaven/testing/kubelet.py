"""A fake kubelet (testing/): stands in for nodes so that workloads really run.

It registers Nodes (Ready, untainted, a podCIDR each), marks pods bound to
them Running with an IP from the node's podCIDR and Ready containers, and
finalizes pods being deleted (without a kubelet they stay Terminating). The
scheduler, controllers and endpoints controller do the rest for real:
Deployments → ReplicaSets → Pods → Running → Endpoints.

A pod that carries kuberaven's VIF annotation (network/vif.py) gets the VIF's
IP, as a kubelet whose runtime ran kuberaven-cni reports it; with
``vif_wait`` pods wait for that annotation, as they do with kuberaven-cni
installed.

It watches pods with kuberaven's own Raven engine. ``restart_container`` and
``crash`` change a pod's status the way a real kubelet would after a
container restart or crash, for tests of restart detection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from datetime import UTC, datetime
from typing import Any

from ..kube.client import KubeClient
from ..kube.errors import Conflict, NotFound
from ..kube.reflector import WatchEvent
from ..network.vif import VIF_ANNOTATION, Vif
from ..watch.engine import Engine
from ..watch.watcher import Watcher, WatchTarget

log = logging.getLogger(__name__)
MERGE_PATCH = "application/merge-patch+json"
NODE_PREFIX = "kuberaven-node-"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Node:
    def __init__(self, name: str, cidr: str, address: str | None = None) -> None:
        """``address``: the node's InternalIP (a nested node's: its VM's); by default its podCIDR's first."""
        self.name = name
        self.cidr = ipaddress.ip_network(cidr)
        self._hosts = self.cidr.hosts()
        first = str(next(self._hosts))  # .1 is the node's own gateway address
        self.address = address or first
        self._free: list[str] = []
        self.by_pod: dict[str, str] = {}

    def allocate(self, uid: str) -> str:
        if uid not in self.by_pod:
            self.by_pod[uid] = self._free.pop() if self._free else str(next(self._hosts))
        return self.by_pod[uid]

    def claim(self, uid: str, ip: str) -> None:
        """Remember an IP a previous run gave out, so it is not handed out twice (one of ours: not a VIF's)."""
        if ipaddress.ip_address(ip) in self.cidr:
            self.by_pod[uid] = ip

    def release(self, uid: str) -> None:
        ip = self.by_pod.pop(uid, None)
        if ip is not None:
            self._free.append(ip)


class FakeKubelet:
    """Registers ``nodes`` Nodes (``prefix``0, …) and ``nested`` ones (name → InternalIP: Kubernetes nodes in VMs,
    testing/nested.py), and plays their kubelet."""

    def __init__(
        self,
        client: KubeClient,
        nodes: int = 1,
        prefix: str = NODE_PREFIX,
        vif_wait: bool = False,
        nested: dict[str, str] | None = None,
        addresses: dict[str, str] | None = None,
    ) -> None:
        """``addresses``: InternalIPs of some of the ``nodes`` (their ports into OVN: testing/node_ports.py)."""
        self.client = client
        known = addresses or {}
        names = [f"{prefix}{i}" for i in range(nodes)]
        self.nodes = {name: _Node(name, f"10.{128 + i}.0.0/16", known.get(name)) for i, name in enumerate(names)}
        for index, (name, address) in enumerate((nested or {}).items()):
            self.nodes[name] = _Node(name, f"10.{128 + nodes + index}.0.0/16", address)
        self.vif_wait = vif_wait
        pods = WatchTarget("v1", "Pod", field_selector="spec.nodeName!=")
        self.engine = Engine(client, [Watcher(pods, self._on_pod, name="fake-kubelet")])
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        for node in self.nodes.values():
            await self._register(node)
        self._task = asyncio.create_task(self.engine.run(), name="fake-kubelet")
        await self.engine.wait_synced(timeout=60)

    async def stop(self) -> None:
        self.engine.stop()
        await self.wait()

    async def wait(self) -> None:
        """Until the kubelet has stopped."""
        if self._task is not None:
            await self._task

    async def _register(self, node: _Node) -> None:
        manifest = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node.name, "labels": {"kubernetes.io/hostname": node.name}},
            "spec": {"podCIDR": str(node.cidr), "podCIDRs": [str(node.cidr)]},
        }
        with contextlib.suppress(Conflict):  # registered by an earlier run: keep it
            await self.client.request("POST", "/api/v1/nodes", body=manifest)
        stamp = now()
        capacity = {"cpu": "64", "memory": "256Gi", "pods": "20000", "ephemeral-storage": "1Ti"}
        status = {
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "addresses": [
                    {"type": "InternalIP", "address": node.address},
                    {"type": "Hostname", "address": node.name},
                ],
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kuberaven fake kubelet",
                        "lastHeartbeatTime": stamp,
                        "lastTransitionTime": stamp,
                    }
                ],
                "nodeInfo": {"kubeletVersion": "v1.20.2-fake", "architecture": "amd64", "operatingSystem": "linux"},
            }
        }
        path = f"/api/v1/nodes/{node.name}"
        await self.client.request("PATCH", f"{path}/status", body=status, content_type=MERGE_PATCH)
        # Admission taints new nodes not-ready; the node lifecycle controller
        # that would lift it is off, so the kubelet lifts it itself.
        await self.client.request("PATCH", path, body={"spec": {"taints": None}}, content_type=MERGE_PATCH)

    async def _on_pod(self, event: WatchEvent) -> None:
        pod = event.object
        meta = pod["metadata"]
        node = self.nodes.get((pod.get("spec") or {}).get("nodeName", ""))
        if event.type == "DELETED":
            for n in self.nodes.values():
                n.release(meta["uid"])
            return
        if node is None:
            return
        status = pod.get("status") or {}
        if meta.get("deletionTimestamp"):
            await self._finalize(pod)
        elif status.get("podIP"):
            node.claim(meta["uid"], status["podIP"])
        else:
            await self._mark_running(node, pod)

    async def _finalize(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        body = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta["uid"]},
        }
        with contextlib.suppress(NotFound, Conflict):  # already gone, or a new pod took the name
            await self.client.request(
                "DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", body=body
            )

    async def _mark_running(self, node: _Node, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        vif = (meta.get("annotations") or {}).get(VIF_ANNOTATION)
        if pod["spec"].get("hostNetwork"):
            ip = node.address
        elif vif is not None:
            ip = Vif.from_json(vif).ip
        elif self.vif_wait:
            return  # the annotation's event brings the pod back
        else:
            ip = node.allocate(meta["uid"])
        stamp = now()
        containers = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": f"fake://{c.get('image', '')}",
                "containerID": f"fake://{meta['uid']}/{c['name']}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": stamp}},
                "lastState": {},
            }
            for c in pod["spec"].get("containers", [])
        ]
        patch = {
            "metadata": {"resourceVersion": meta["resourceVersion"]},
            "status": {
                "phase": "Running",
                "hostIP": node.address,
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "startTime": stamp,
                "conditions": _conditions(True, stamp),
                "containerStatuses": containers,
            },
        }
        try:
            await self._patch_status(meta, patch)
        except Conflict:
            pass  # the pod changed meanwhile; its newer event will bring us back
        except NotFound:
            node.release(meta["uid"])

    async def _patch_status(self, meta: dict[str, Any], patch: dict[str, Any]) -> None:
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        await self.client.request("PATCH", path, body=patch, content_type=MERGE_PATCH)


def _conditions(ready: bool, stamp: str) -> list[dict[str, str]]:
    value = "True" if ready else "False"
    return [
        {"type": "Initialized", "status": "True", "lastTransitionTime": stamp},
        {"type": "Ready", "status": value, "lastTransitionTime": stamp},
        {"type": "ContainersReady", "status": value, "lastTransitionTime": stamp},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
    ]


async def _change_containers(client: KubeClient, namespace: str, name: str, change) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    pod = await client.request("GET", path)
    statuses = pod.get("status", {}).get("containerStatuses")
    if not statuses:
        raise ValueError(f"pod {namespace}/{name} has no running containers yet")
    stamp = now()
    ready = change(statuses, stamp)
    patch = {
        "metadata": {"resourceVersion": pod["metadata"]["resourceVersion"]},
        "status": {"containerStatuses": statuses, "conditions": _conditions(ready, stamp)},
    }
    return await client.request("PATCH", f"{path}/status", body=patch, content_type=MERGE_PATCH)


async def restart_container(client: KubeClient, namespace: str, name: str, container: str) -> dict[str, Any]:
    """The container exited and was restarted in place: restartCount + 1, running again."""

    def change(statuses: list[dict[str, Any]], stamp: str) -> bool:
        for status in statuses:
            if status["name"] == container:
                previous = status.get("state", {}).get("running", {}).get("startedAt", stamp)
                status["restartCount"] = status.get("restartCount", 0) + 1
                status["lastState"] = {
                    "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": previous, "finishedAt": stamp}
                }
                status["state"] = {"running": {"startedAt": stamp}}
                status["ready"] = True
                return all(s["ready"] for s in statuses)
        raise ValueError(f"pod {namespace}/{name} has no container {container!r}")

    return await _change_containers(client, namespace, name, change)


async def crash(client: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    """Every container crashed: restartCount + 1, waiting in CrashLoopBackOff, pod not ready."""

    def change(statuses: list[dict[str, Any]], stamp: str) -> bool:
        for status in statuses:
            previous = status.get("state", {}).get("running", {}).get("startedAt", stamp)
            status["restartCount"] = status.get("restartCount", 0) + 1
            status["lastState"] = {
                "terminated": {"exitCode": 1, "reason": "Error", "startedAt": previous, "finishedAt": stamp}
            }
            status["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
            status["ready"] = False
        return False

    return await _change_containers(client, namespace, name, change)
