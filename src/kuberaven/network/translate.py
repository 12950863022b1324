"""What each Kubernetes object should become in the network model (network/, pure functions).

    Namespace ──► network + subnet + security group     (unless a skipped system namespace)
    Pod       ──► PortSpec: its IP on its namespace's network (none: hostNetwork, finished, no IP yet)
    Service + Endpoints ──► LoadBalancerSpec: VIP = clusterIP, a listener per (protocol, port),
                            members = the ready addresses; a floating IP for type LoadBalancer

No I/O here: the translator (translator.py) feeds these the objects it
watches and makes the backend match what they return; unit tests feed them
recorded objects.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from .backend import NetworkOptions

SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})
# The API server's own Service: its endpoints are the API servers, not pods.
SKIPPED_SERVICES = frozenset({("default", "kubernetes")})
TRANSLATED_SERVICE_TYPES = ("ClusterIP", "LoadBalancer")


def translated_namespace(name: str, options: NetworkOptions) -> bool:
    return options.include_system_namespaces or name not in SYSTEM_NAMESPACES


@dataclass(frozen=True)
class PortSpec:
    name: str  # namespace/pod, as kuryr named them
    address: str
    device_id: str  # the pod's uid


@dataclass(frozen=True)
class PodPort:
    """What the translator asks of the backend for one pod (a batch of them at a time)."""

    name: str  # the port's name: namespace/pod
    pod_ip: str
    uid: str
    namespace: str
    pod: str


# What pod_port() reads: the pods informer decodes these for the translator (kube/projection.py).
POD_PORT_FIELDS = ("metadata.deletionTimestamp", "spec.hostNetwork", "status.phase", "status.podIP")


def pod_port(pod: dict[str, Any]) -> PortSpec | None:
    """The port a pod should have, or None (hostNetwork, no IP yet, or finished and so without one)."""
    spec, status, meta = pod.get("spec", {}), pod.get("status", {}), pod["metadata"]
    if spec.get("hostNetwork") or status.get("phase") in ("Succeeded", "Failed"):
        return None
    if meta.get("deletionTimestamp") is not None:
        return None
    address = status.get("podIP")
    if not address:
        return None
    return PortSpec(f"{meta['namespace']}/{meta['name']}", address, meta["uid"])


@dataclass(frozen=True)
class MemberSpec:
    name: str  # namespace/pod:port
    address: str
    port: int


@dataclass(frozen=True)
class ListenerSpec:
    name: str  # <load balancer>:<protocol>:<port>
    protocol: str
    port: int
    members: tuple[MemberSpec, ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        return (self.protocol, self.port)


@dataclass(frozen=True)
class LoadBalancerSpec:
    name: str  # namespace/service
    vip_address: str
    listeners: tuple[ListenerSpec, ...]
    floating_ip: bool = False
    # spec.loadBalancerIP: the floating IP asked for, if any.
    floating_address: str | None = None

    def digest(self) -> str:
        """A short fingerprint: equal specs need no backend call."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


def service_load_balancer(service: dict[str, Any], endpoints: dict[str, Any] | None) -> LoadBalancerSpec | None:
    """The load balancer a Service should have, or None (headless, other types, default/kubernetes)."""
    meta, spec = service["metadata"], service.get("spec", {})
    namespace, name = meta["namespace"], meta["name"]
    if (namespace, name) in SKIPPED_SERVICES or spec.get("type", "ClusterIP") not in TRANSLATED_SERVICE_TYPES:
        return None
    cluster_ip = spec.get("clusterIP")
    if not cluster_ip or cluster_ip == "None":
        return None
    lb_name = f"{namespace}/{name}"
    ready = _ready_endpoints(endpoints)
    listeners = []
    for port in spec.get("ports", []):
        protocol = port.get("protocol", "TCP")
        members = ready.get((port.get("name") or "", protocol), ())
        listeners.append(
            ListenerSpec(
                f"{lb_name}:{protocol}:{port['port']}",
                protocol,
                int(port["port"]),
                tuple(sorted(members, key=lambda m: (m.address, m.port))),
            )
        )
    is_lb = spec.get("type") == "LoadBalancer"
    return LoadBalancerSpec(
        lb_name,
        cluster_ip,
        tuple(listeners),
        floating_ip=is_lb,
        floating_address=(spec.get("loadBalancerIP") or None) if is_lb else None,
    )


def _ready_endpoints(endpoints: dict[str, Any] | None) -> dict[tuple[str, str], list[MemberSpec]]:
    """Ready addresses per (port name, protocol) — how an Endpoints port matches its Service port."""
    found: dict[tuple[str, str], list[MemberSpec]] = {}
    if not endpoints:
        return found
    namespace = endpoints["metadata"]["namespace"]
    for subset in endpoints.get("subsets") or []:
        for port in subset.get("ports") or []:
            key = (port.get("name") or "", port.get("protocol", "TCP"))
            for address in subset.get("addresses") or []:
                target = (address.get("targetRef") or {}).get("name") or address["ip"]
                found.setdefault(key, []).append(
                    MemberSpec(f"{namespace}/{target}:{port['port']}", address["ip"], int(port["port"]))
                )
    return found
