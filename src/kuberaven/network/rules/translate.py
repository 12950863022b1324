"""What each Kubernetes object should become in the network model (network/, pure functions).

    Namespace ──► network + subnet + security group     (unless a skipped system namespace)
    Pod       ──► PortSpec: a port on its namespace's network (none: hostNetwork, finished, not yet due)
              ──► PortAsk: whether the backend is asked again, for which fixed IP
              ──► Vif: the annotation our CNI reads (scheduled pods without an IP yet)
    (Services: services.py)

No I/O here: the translator (translator.py) feeds these the objects it
watches and makes the backend match what they return; unit tests feed them
recorded objects.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from typing import Any

from ..backend import CNI_KUBERAVEN, NetworkOptions
from ..drivers.port_pools import Trunk
from ..vif import PORT_ACTIVE, PORT_DOWN, Binding, Vif

SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})


def translated_namespace(name: str, options: NetworkOptions) -> bool:
    return options.include_system_namespaces or name not in SYSTEM_NAMESPACES


@dataclass(frozen=True)
class PortSpec:
    name: str  # namespace/pod, as kuryr named them
    address: str | None  # the pod's IP; None: scheduled, and the port's IP will be the pod's (our CNI)
    device_id: str  # the pod's uid
    node: str | None = None  # spec.nodeName


@dataclass(frozen=True)
class PodPort:
    """What the translator asks of the backend for one pod (a batch of them at a time)."""

    name: str  # the port's name: namespace/pod
    pod_ip: str | None
    uid: str
    namespace: str
    pod: str
    node: str | None = None
    # A new port's security groups: the groups of the NetworkPolicies selecting the pod; (): its namespace's.
    security_groups: tuple[str, ...] = ()
    trunk: Trunk | None = None  # its node's trunk: a nested node (a VM), whose pods' ports are subports of it


# What pod_port() reads: the pods informer decodes these for the translator (kube/projection.py).
POD_PORT_FIELDS = (
    "metadata.deletionTimestamp",
    "spec.hostNetwork",
    "spec.nodeName",
    "status.phase",
    "status.podIP",
)


def pod_port(pod: dict[str, Any], options: NetworkOptions) -> PortSpec | None:
    """The port a pod should have, or None (hostNetwork, finished, being deleted, or not yet due).

    With our CNI a port is due once the pod is scheduled, before it has an IP (the CNI gives
    it the port's); with another CNI, once that CNI gave the pod its IP.
    """
    spec, status, meta = pod.get("spec", {}), pod.get("status", {}), pod["metadata"]
    if spec.get("hostNetwork") or status.get("phase") in ("Succeeded", "Failed"):
        return None
    if meta.get("deletionTimestamp") is not None:
        return None
    address, node = status.get("podIP") or None, spec.get("nodeName") or None
    if address is None and (options.cni != CNI_KUBERAVEN or node is None):
        return None
    return PortSpec(f"{meta['namespace']}/{meta['name']}", address, meta["uid"], node)


@dataclass(frozen=True)
class PortAsk:
    """Whether a pod's port needs a backend call, and with which fixed IP (None: the IPAM picks)."""

    needed: bool
    address: str | None = None


def port_ask(state: dict[str, Any] | None, pod_ip: str | None, options: NetworkOptions) -> PortAsk:
    """What to ask of the backend for a pod, given its translation state (None: no port yet).

    In "cluster" mode a pod's IP from another CNI is the port's fixed IP (a port made before
    the pod had one follows it); in "namespace" mode, and before the pod has an IP, the
    subnet's IPAM picks. A state without a MAC predates the VIF: asked again (same port).
    """
    fixed = pod_ip if options.subnet_mode == "cluster" else None
    if state is None or "mac" not in state:
        return PortAsk(True, fixed)
    if fixed is None or fixed == state["address"]:
        return PortAsk(False)
    return PortAsk(True, fixed)


def pod_vif(state: dict[str, Any], binding: str) -> Vif:
    """The VIF annotation of a pod, from its translation state (which keeps its namespace's subnet too).

    ``binding`` is the backend's (the node's, for a bare node); a state with a trunk is a nested pod's
    subport, whose binding is vlan, with its VLAN id, trunk and the trunk's parent MAC. Its status is the one
    the pods reconciler recorded from activation.py's reports; before, an OVS port or a subport waits to be
    bound (DOWN: a subport's follows its trunk's parent port) and a bridge port, which nothing binds, is ACTIVE."""
    cidr = state["cidr"]
    nested = bool(state.get("trunk"))
    binding = Binding.VLAN if nested else binding
    status = state.get("status") or (PORT_ACTIVE if binding == Binding.BRIDGE else PORT_DOWN)
    gateway = state.get("gateway") or str(next(ipaddress.ip_network(cidr).hosts()))
    return Vif(
        port=state["port"],
        network=state["network"],
        subnet=state["subnet"],
        cidr=cidr,
        gateway=gateway,
        mac=state["mac"],
        ip=state["address"],
        node=state.get("node") or "",
        binding=binding,
        mtu=state["mtu"],
        security_groups=list(state.get("security_groups") or []),
        status=status,
        vlan_id=state["vlan_id"] if nested else None,
        trunk=state["trunk"] if nested else None,
        parent_mac=state["parent_mac"] if nested else None,
    )


def since_creation(pod: dict[str, Any], now: dt.datetime) -> float | None:
    """Seconds from the pod's creation (whole seconds: Kubernetes keeps no more) to ``now``; None without one."""
    created = pod["metadata"].get("creationTimestamp")
    if not created:
        return None
    return max(0.0, (now - dt.datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds())
