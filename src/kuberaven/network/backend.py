"""What every network backend shares (network/): the tags that find its resources again, its errors, its options.

    translator ──► NetworkBackend (drivers/: a protocol per concept) ──► backends/embedded.py | backends/openstack.py
        every resource made carries tags(cluster, uid) ──► NetworkBackend.owned() lists them back (Owned)
        every failure is a BackendError (AddressInUse, AddressesExhausted: what a caller acts on)

Every resource made for an object carries two tags: ``kuberaven-cluster=<cluster>``
and ``kuberaven-uid=<Kubernetes uid>`` (or ``kuberaven-uid=infrastructure``),
which is how NetworkBackend.owned() finds them again at start-up to remove
what no Kubernetes object needs any more. Pooled ports are made for no
object yet: they are named instead (pool_port_name()), and port pools find
them by that name (network/pool_recovery.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, Literal

CLUSTER_TAG = "kuberaven-cluster="
UID_TAG = "kuberaven-uid="
INFRASTRUCTURE = "infrastructure"
POOL = "pool"  # the uid word of pooled ports' description (network/pools.py): which pod holds one is in the database
SUBPORT = "subport"  # the uid word of pooled subports' description (a nested node's pool: network/pools.py)


def pool_port_name(cluster: str) -> str:
    """The name of a cluster's pooled ports: how they are listed (a name filter), since ML2/OVN takes no tags in
    a port's POST and tagging each port after would double the calls of the step that bounds pods' start."""
    return f"kuberaven-pool-{cluster}"


CNI_KUBERAVEN: Final = "kuberaven"
CNI_OTHER: Final = "other"
# The service.kubernetes.io/service-proxy-name that kuberaven serves unless network_service_proxy_name says otherwise.
SERVICE_PROXY_NAME: Final = "kuberaven"


def tags(cluster: str, uid: str) -> list[str]:
    return [f"{CLUSTER_TAG}{cluster}", f"{UID_TAG}{uid}"]


def tagged_cluster(resource_tags: list[str]) -> str | None:
    return next((t.removeprefix(CLUSTER_TAG) for t in resource_tags if t.startswith(CLUSTER_TAG)), None)


def tagged_uid(resource_tags: list[str]) -> str | None:
    return next((t.removeprefix(UID_TAG) for t in resource_tags if t.startswith(UID_TAG)), None)


class BackendError(RuntimeError):
    """A backend call failed; the message names the resource."""


class AddressInUse(BackendError):
    """The fixed address asked for is held by another port (``holder``, of the pod ``device_id``)."""

    def __init__(self, address: str, holder: str, device_id: str | None) -> None:
        super().__init__(f"address {address} is in use by port {holder} (device {device_id})")
        self.address = address
        self.holder = holder
        self.device_id = device_id


class AddressesExhausted(BackendError):
    """No free address (or subnet) is left in a pool."""


@dataclass(frozen=True)
class NetworkOptions:
    """How the cluster maps onto the network model (settings: network_<field>; a cluster's row may override some)."""

    # "cluster": every namespace's subnet is the cluster's pod CIDR (like FLANNEL_NET) and
    # ports keep the pod's IP; "namespace": each namespace gets its own subnet cut from
    # namespace_pool, and ports get an address from it. None: "namespace" with our CNI (its pods' ports
    # need the router, which cannot join subnets that repeat one CIDR), else "cluster".
    subnet_mode: Literal["cluster", "namespace"] | None = None
    pod_cidr: str = "10.128.0.0/9"
    namespace_pool: str = "10.64.0.0/12"
    namespace_prefix: int = 24
    service_cidr: str = "10.0.0.0/24"
    # Floating IPs of LoadBalancer Services come from an existing external network (name or id), as
    # on a real cloud; None: kuberaven makes its own, kuberaven-<cluster>-external with external_cidr
    # (needs admin rights on a cloud: for local use).
    external_network: str | None = None
    external_cidr: str = "172.24.4.0/24"
    include_system_namespaces: bool = False
    # Which CNI gives pods their network. "kuberaven": our kuberaven-cni, so a port is made as
    # soon as a pod is scheduled and the pod gets the port's IP through the VIF annotation;
    # "other": another CNI (flannel, calico…) picks the IP and the port follows it.
    cni: Literal["kuberaven", "other"] = CNI_OTHER
    # Translate NetworkPolicies into security groups (and decode pods' labels and named ports for them).
    policies: bool = True
    # LoadBalancer Services with this spec.loadBalancerClass get floating IPs too (those with none always do);
    # another class's are left to its controller (their in-cluster load balancer is still made).
    load_balancer_class: str | None = None
    # Services labelled service.kubernetes.io/service-proxy-name are left to the proxy they name, unless it is this
    # one (None: all of them are left).
    service_proxy_name: str | None = SERVICE_PROXY_NAME
    # Port pools (openstack backend with our CNI; network/pools.py): free ports kept per (node, namespace,
    # security groups), the most kept, the fewest asked of Neutron at once, how long an unused pool keeps
    # more than its minimum, and how many free ports prewarming (pools nobody took from yet) may hold.
    pool_min: int = 45
    pool_max: int = 60
    pool_batch: int = 5
    pool_idle: float = 600.0
    pool_prewarm_limit: int = 200

    def __post_init__(self) -> None:
        if self.subnet_mode is None:
            object.__setattr__(self, "subnet_mode", "namespace" if self.cni == CNI_KUBERAVEN else "cluster")
        elif self.subnet_mode == "cluster" and self.cni == CNI_KUBERAVEN:
            raise ValueError(
                "network_subnet_mode=cluster cannot work with network_cni=kuberaven: every namespace's subnet "
                "would repeat the pod CIDR, so pods of two namespaces can get one address and the router cannot "
                "join them (Services and floating IPs need it); set network_subnet_mode=namespace, or leave it unset"
            )
        if not 0 <= self.pool_min <= self.pool_max:
            raise ValueError(
                f"network_pool_min ({self.pool_min}) must be between 0 and network_pool_max ({self.pool_max})"
            )
        if self.pool_batch < 1:
            raise ValueError(f"network_pool_batch must be at least 1, not {self.pool_batch}")


def for_cluster(
    options: NetworkOptions,
    *,
    pod_cidr: str | None,
    service_cidr: str | None,
    namespace_pool: str | None,
    external_network: str | None,
) -> NetworkOptions:
    """The options of one cluster: its own values (a KubernetesService row's, None: not set) over the defaults."""
    return replace(
        options,
        pod_cidr=pod_cidr or options.pod_cidr,
        service_cidr=service_cidr or options.service_cidr,
        namespace_pool=namespace_pool or options.namespace_pool,
        external_network=external_network or options.external_network,
    )


# One per backend resource of the cluster, read a page at a time by a garbage collection (at the cold start's end,
# when the stores are fullest): what it compares and logs, not the resource's tags.
@dataclass(frozen=True, slots=True)
class Owned:
    """A tagged backend resource, as :meth:`NetworkBackend.owned` lists it."""

    kind: str  # floating_ip | load_balancer | port | security_group | network | source_filters
    id: str
    name: str
    uid: str | None  # its object's (the uid tag), what the garbage collection compares


OWNED_PAGE = 500  # resources owned() reads at a time
# The order in which resources can be deleted: what refers to others first.
DELETE_ORDER = ("floating_ip", "load_balancer", "port", "security_group", "network")
# A Service's filters on the pods' networks (SourceFilter), owned() by the Service's uid: they refer to nothing.
SOURCE_FILTERS_KIND = "source_filters"
