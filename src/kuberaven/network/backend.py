"""The network backend interface (network/): what the translator drives, whichever backend it is.

    translator ──► NetworkBackend ──► backends/embedded.py (kuberaven's own tables)
                                  └─► backends/openstack.py (Neutron + Octavia through openstacksdk)

Calls are blocking (openstacksdk and SQLAlchemy are); the translator runs
them in worker threads. Every ``ensure_*`` is idempotent: it finds what a
previous attempt made (by name and the object's uid tag) before creating, so
a retry after a crash or a timeout never makes a second copy.

Every resource carries two tags: ``kuberaven-cluster=<cluster>`` and
``kuberaven-uid=<Kubernetes uid>`` (or ``kuberaven-uid=infrastructure``),
which is how :meth:`NetworkBackend.owned` finds them again at start-up to
remove what no Kubernetes object needs any more.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal, Protocol

from .views import LoadBalancerView, PortView
from .vif import DEFAULT_MTU

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
BINDING_FAILED = "binding_failed"  # Neutron's binding:vif_type of a port no mechanism driver could bind


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


@dataclass(frozen=True)
class Infrastructure:
    """What every translation of a cluster shares, made once at start-up."""

    service_network: str
    service_subnet: str
    external_network: str
    external_subnet: str
    router: str
    subnet_pool: str | None = None


@dataclass(frozen=True)
class Subnet:
    id: str
    cidr: str
    gateway: str | None = None


@dataclass(frozen=True)
class Port:
    id: str
    address: str
    mac: str = ""
    mtu: int = DEFAULT_MTU


@dataclass(frozen=True)
class PooledPort:
    """A port made for a pool, as the backend lists it (network/pools.py rebuilds its pools from these)."""

    id: str
    network: str
    node: str  # binding:host_id
    security_groups: tuple[str, ...]
    address: str
    mac: str
    mtu: int = DEFAULT_MTU
    trunk: str | None = None  # a subport (a nested node's pool): its trunk
    vlan_id: int | None = None  # and its segmentation id there
    subport: bool = False  # made as a subport (attached to a trunk, or to none when trunk is None)


@dataclass(frozen=True)
class Trunk:
    """A Neutron trunk whose parent port is a nested node's VM NIC (network/rules/trunks.py finds it)."""

    id: str
    parent_port: str
    parent_mac: str
    parent_status: str  # the parent port's status: in ML2/OVN its subports' follows it


@dataclass(frozen=True)
class PortStatus:
    """A port's status as the backend reports it (network/activation.py follows it)."""

    id: str
    device_id: str  # the pod's uid
    status: str  # ACTIVE, DOWN, BUILD, ERROR
    vif_type: str = ""  # how it is bound: ovs; binding_failed, unbound
    host: str = ""  # binding:host_id

    def describe(self) -> str:
        failed = (
            f" (binding failed: no OVN chassis or agent on host {self.host!r})"
            if self.vif_type == BINDING_FAILED
            else ""
        )
        return f"{self.status}{failed}"


@dataclass(frozen=True)
class PortRequest:
    """One pod's port, as ensure_port() takes it (ensure_ports() takes many)."""

    network: str
    subnet: str
    name: str
    device_id: str
    address: str | None
    security_groups: list[str]
    tags: list[str]
    host: str | None = None  # the node the pod runs on: binding:host_id


@dataclass(frozen=True)
class LoadBalancer:
    id: str
    vip_address: str
    vip_port: str
    provider: str | None = None  # Octavia's provider (amphora, ovn …); None: the embedded backend


@dataclass(frozen=True)
class Listener:
    id: str
    name: str
    protocol: str
    port: int
    pool: str | None = None
    pool_protocol: str | None = None  # PROXY for a PROXY-protocol pool; else the listener's protocol


@dataclass(frozen=True)
class Member:
    id: str
    name: str
    address: str
    port: int
    monitor_port: int | None = None  # where the health monitor checks it, when not ``port``

    @property
    def key(self) -> tuple[str, int, int | None]:
        return (self.address, self.port, self.monitor_port)


@dataclass(frozen=True)
class MemberSpec:
    """A member a pool should have: set_members() makes a pool's members exactly a list of these."""

    name: str  # namespace/pod:port
    address: str
    port: int
    monitor_port: int | None = None  # the readiness probe's port, when it is not ``port``

    @property
    def key(self) -> tuple[str, int, int | None]:
        return (self.address, self.port, self.monitor_port)


# -- what a Service's options become on a listener and its pool ----------------

SOURCE_IP = "SOURCE_IP"  # session persistence by client address (sessionAffinity: ClientIP)
DEFAULT_LB_METHOD = "ROUND_ROBIN"  # a pool's algorithm when a Service asks for none (and the provider has it)


@dataclass(frozen=True)
class Persistence:
    type: str  # SOURCE_IP
    timeout: int | None = None  # seconds; Octavia (Zed) takes a timeout on UDP and SCTP pools only
    # sessionAffinityConfig.clientIP.timeoutSeconds whatever the pool's protocol: what OVN's affinity_timeout
    # takes on every protocol (backends/ovn_affinity.py); None: ``timeout``, else Kubernetes' default.
    client_timeout: int | None = None


@dataclass(frozen=True)
class HealthMonitor:
    """A pool's health monitor, from the pods' readiness probe."""

    type: str  # HTTP | HTTPS | TCP
    delay: int  # seconds between checks (periodSeconds)
    timeout: int  # seconds a check may take (timeoutSeconds, at most ``delay``)
    max_retries: int  # successes before a member is ONLINE again (successThreshold)
    max_retries_down: int  # failures before a member is taken out (failureThreshold)
    url_path: str | None = None  # HTTP(S) only


@dataclass(frozen=True)
class Timeouts:
    """A listener's timeouts in milliseconds; None: the provider's default."""

    client_data: int | None = None
    member_connect: int | None = None
    member_data: int | None = None
    tcp_inspect: int | None = None

    def fields(self) -> dict[str, int]:
        """As Octavia's listener fields, those set."""
        named = {
            "timeout_client_data": self.client_data,
            "timeout_member_connect": self.member_connect,
            "timeout_member_data": self.member_data,
            "timeout_tcp_inspect": self.tcp_inspect,
        }
        return {k: v for k, v in named.items() if v is not None}


@dataclass(frozen=True)
class ListenerOptions:
    """What a listener and its pool carry besides protocol and port; the defaults are "none"."""

    allowed_cidrs: tuple[str, ...] = ()  # () lets every source in
    persistence: Persistence | None = None
    monitor: HealthMonitor | None = None
    lb_method: str | None = None  # the pool's algorithm; None: the provider's default
    connection_limit: int | None = None  # None or -1: unlimited
    timeouts: Timeouts = field(default_factory=Timeouts)
    x_forwarded_for: bool = False  # HTTP listeners: the client's address in X-Forwarded-For


@dataclass(frozen=True)
class FloatingIP:
    id: str
    address: str


ANY_IPV4, ANY_IPV6 = "0.0.0.0/0", "::/0"


@dataclass(frozen=True, order=True)
class SecurityGroupRule:
    """One rule of a security group, as Neutron has them: traffic in one direction from/to ``remote_cidr``.

    ``protocol`` None: any protocol (then no ports); ``port_min``/``port_max`` None: every port of it.
    ``description`` says where the rule comes from (``ingress rule 0``): what can-reach names.
    """

    direction: str  # ingress | egress
    remote_cidr: str
    protocol: str | None = None  # tcp | udp | sctp
    port_min: int | None = None
    port_max: int | None = None
    description: str = ""

    @property
    def ethertype(self) -> str:
        return "IPv6" if ":" in self.remote_cidr else "IPv4"

    def same_traffic(self) -> tuple[str, str, str | None, int | None, int | None]:
        """What Neutron compares to refuse a duplicate (the description is not part of it)."""
        return (self.direction, self.remote_cidr, self.protocol, self.port_min, self.port_max)


SOURCE_FILTER_PRIORITY = 2000  # above Neutron's security group ACLs (1001, 1002), below OVN's maximum (32767)
FROM_PODS = "from-lport"  # a switch's ingress pipeline: what its ports (the pods) send, before its load balancers
REJECT = "reject"  # a TCP reset or an ICMP port unreachable: the client is told at once, as kube-proxy's REJECT


@dataclass(frozen=True, order=True)
class SourceFilter:
    """Traffic the pods' networks refuse where it is sent (rules/source_filters.py): an ACL on the pods' logical
    switches as OVN's northbound database holds it (an ACL row's columns; ``match`` in OVN's syntax)."""

    match: str
    priority: int = SOURCE_FILTER_PRIORITY
    direction: str = FROM_PODS
    action: str = REJECT


# One per backend resource of the cluster, read a page at a time by a garbage collection (at the cold start's end,
# when the stores are fullest): what it compares and logs, not the resource's tags.
@dataclass(frozen=True, slots=True)
class Owned:
    """A tagged backend resource, as :meth:`NetworkBackend.owned` lists it."""

    kind: str  # floating_ip | load_balancer | port | security_group | network | source_filters
    id: str
    name: str
    uid: str | None  # its object's (the uid tag), what the garbage collection compares


class NetworkBackend(Protocol):
    name: str

    def ensure_infrastructure(self, cluster: str, options: NetworkOptions) -> Infrastructure: ...

    def ensure_network(self, name: str, tags: list[str]) -> str: ...

    def ensure_subnet(
        self,
        network: str,
        name: str,
        tags: list[str],
        *,
        cidr: str | None = None,
        pool: str | None = None,
        prefix: int | None = None,
    ) -> Subnet:
        """A subnet with ``cidr``, or the next free ``prefix``-long one of subnet pool ``pool``."""

    def ensure_security_group(self, name: str, tags: list[str]) -> str: ...

    def ensure_ingress_rule(self, group: str, remote_cidr: str) -> None:
        """Security group ``group`` lets in any traffic from ``remote_cidr`` (idempotent)."""

    def security_group_rules(self, group: str) -> list[SecurityGroupRule]:
        """The rules of security group ``group``."""

    def set_security_group_rules(self, group: str, rules: list[SecurityGroupRule]) -> None:
        """Security group ``group`` has exactly ``rules``: others removed first, missing ones added (idempotent)."""

    def set_port_security_groups(self, port: str, groups: list[str]) -> None:
        """Port ``port`` carries exactly ``groups`` (idempotent)."""

    def ensure_router_interface(self, router: str, subnet: str) -> None:
        """``subnet`` attached to ``router`` (idempotent); deleting the subnet's network detaches it."""

    def ensure_port(
        self,
        network: str,
        subnet: str,
        name: str,
        device_id: str,
        address: str | None,
        security_groups: list[str],
        tags: list[str],
        host: str | None = None,
    ) -> Port:
        """A port with fixed IP ``address`` (or the IPAM's pick), bound to ``host``; AddressInUse if held."""

    def ensure_ports(self, requests: list[PortRequest]) -> list[Port | BackendError]:
        """Many ports at once (a cold start's pods): each request's port, or the error it met alone."""

    def ensure_load_balancer(
        self,
        name: str,
        subnet: str,
        vip_address: str,
        tags: list[str],
        *,
        flavor: str | None = None,
        zone: str | None = None,
    ) -> LoadBalancer:
        """Waits for it to be ACTIVE; one in ERROR is deleted and made again. ``flavor`` and ``zone`` (an
        availability zone) count at creation only: a load balancer keeps the ones it was made with."""

    def listeners(self, load_balancer: str) -> list[Listener]: ...

    def create_listener(
        self, load_balancer: str, name: str, protocol: str, port: int, tags: list[str], pool_protocol: str | None = None
    ) -> Listener:
        """A listener and its pool (of ``pool_protocol``, else the listener's protocol), with the provider's
        default algorithm."""

    def delete_listener(self, load_balancer: str, listener: Listener) -> None:
        """The listener and its pool (with its members)."""

    def members(self, pool: str) -> list[Member]: ...

    def create_member(
        self,
        load_balancer: str,
        pool: str,
        name: str,
        address: str,
        port: int,
        subnet: str,
        tags: list[str],
        monitor_port: int | None = None,
    ) -> Member: ...

    def delete_member(self, load_balancer: str, pool: str, member: str) -> None: ...

    def set_members(
        self, load_balancer: str, pool: str, members: Sequence[MemberSpec], subnet: str | None, tags: list[str]
    ) -> None:
        """The pool's members become exactly ``members`` (matched by address, port and monitor port) in one
        change of the load balancer; no change when they already are. ``subnet`` may be None only when
        ``members`` is empty."""

    def ensure_listener_options(
        self, load_balancer: str, listener: Listener, options: ListenerOptions, tags: list[str]
    ) -> list[str]:
        """The listener's and its pool's options and health monitor as ``options`` say; only what differs is
        changed, in place (the listener stays). Options the provider does not offer are left as they are and
        returned, each as "<option> of <listener>: <why>"."""

    def ensure_floating_ip(
        self, external_network: str, port: str, address: str | None, tags: list[str], subnet: str | None = None
    ) -> FloatingIP:
        """A floating IP (``address`` if given, else one of ``subnet`` if given) associated with ``port``."""

    def release_floating_ip(self, floating_ip: str) -> None:
        """Keep a floating IP but let it go: no port, no kuberaven tags (owned() no longer lists it)."""

    def set_source_filters(
        self, cluster: str, owner: str, networks: Sequence[str], filters: Sequence[SourceFilter]
    ) -> str | None:
        """The pods' ``networks`` refuse ``filters`` (those of ``owner``, a Service's uid), and no other network
        keeps the owner's (no filters: they go). None when they hold, else why they cannot (said on the Service)."""

    def copy_source_filters(self, cluster: str, network: str) -> None:
        """A network just made refuses what the cluster's other pods' networks refuse."""

    def owned(self, cluster: str) -> Iterator[Owned]:
        """Every resource tagged with the cluster, in the order they can be deleted, read as iterated (where the
        backend's paging survives deletions meanwhile, a page of about OWNED_PAGE at a time: a cluster has a port
        per pod). Iterate in one thread."""

    def delete(self, kind: str, resource: str) -> None:
        """Delete one resource with what hangs off it (a network's ports and subnets, a load
        balancer's listeners, pools and members); gone already is fine."""

    # -- what can-reach reads (network/reach_store.py) ------------------------

    def read_ports(self, ports: Sequence[str]) -> dict[str, PortView]:
        """The ports of these ids that exist, by id: address and security groups as the backend holds them."""

    def read_rules(self, groups: Sequence[str]) -> dict[str, list[SecurityGroupRule]]:
        """The rules of these security groups, by group id (a missing group: none)."""

    def read_load_balancer(self, load_balancer: str) -> LoadBalancerView | None:
        """A load balancer with its listeners' source ranges and members and its floating IPs; None: gone."""

    def close(self) -> None: ...


OWNED_PAGE = 500  # resources owned() reads at a time
# The order in which resources can be deleted: what refers to others first.
DELETE_ORDER = ("floating_ip", "load_balancer", "port", "security_group", "network")
# A Service's filters on the pods' networks (SourceFilter), owned() by the Service's uid: they refer to nothing.
SOURCE_FILTERS_KIND = "source_filters"


def ensure_ports_one_by_one(backend: NetworkBackend, requests: list[PortRequest]) -> list[Port | BackendError]:
    """ensure_ports() for a backend with no bulk call: each request alone, its error kept as its result."""
    results: list[Port | BackendError] = []
    for r in requests:
        try:
            results.append(
                backend.ensure_port(
                    r.network, r.subnet, r.name, r.device_id, r.address, r.security_groups, r.tags, r.host
                )
            )
        except BackendError as error:
            results.append(error)
    return results
