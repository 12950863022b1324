"""What a Service should become in the network model (network/, pure functions).

    Service + its Endpoints (or EndpointSlices, merged into the same shape) + one pod's readiness probe
        ──► LoadBalancerSpec: VIP = clusterIP, a listener per (protocol, port), members = the ready addresses,
            each listener with its ListenerOptions:
                loadBalancerSourceRanges   ──► allowed CIDRs          (type LoadBalancer)
                sessionAffinity: ClientIP  ──► SOURCE_IP persistence  (Octavia's timeout on UDP pools only; OVN's
                                               affinity timeout, client_timeout, on every protocol)
                readinessProbe             ──► HTTP/HTTPS/TCP health monitor (exec and gRPC: none)
            externalTrafficPolicy: Local   ──► only addresses that name a node are members (type LoadBalancer)
            type LoadBalancer              ──► a floating IP, spec.loadBalancerIP if set (none for another
                                               spec.loadBalancerClass, or an internal load balancer)
            cloud-provider-openstack's annotations (lb_annotations.py) ──► algorithm, connection limit,
                                               timeouts, PROXY pools, X-Forwarded-For, flavor, zone, health
                                               monitor, floating network/subnet, member subnet

No I/O here: loadbalancers.py feeds these the objects it watches and makes
the backend match what they return; unit tests feed them recorded objects.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..backend import SERVICE_PROXY_NAME
from ..drivers.load_balancers import SOURCE_IP, HealthMonitor, ListenerOptions, MemberSpec, Persistence
from .lb_annotations import MAX_RETRIES, MIN_RETRIES, MonitorOverrides, load_balancer_annotations
from .source_ranges import ENFORCED

# The API server's own Service: its endpoints are the API servers, not pods.
SKIPPED_SERVICES = frozenset({("default", "kubernetes")})
# A NodePort Service is a ClusterIP Service too: pods reach it at its clusterIP (its node ports are not served).
TRANSLATED_SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
LOAD_BALANCER = "LoadBalancer"
# Kubernetes' labels that keep a Service from the cluster's service proxy (kube-proxy's informers filter on both):
# one served by the proxy it names, one that has no virtual IP.
SERVICE_PROXY_NAME_LABEL = "service.kubernetes.io/service-proxy-name"
HEADLESS_LABEL = "service.kubernetes.io/headless"
# The finalizer Kubernetes' service controller keeps on a LoadBalancer Service until its load balancer is gone.
LOAD_BALANCER_CLEANUP = "service.kubernetes.io/load-balancer-cleanup"
CLIENT_IP = "ClientIP"
DEFAULT_AFFINITY_SECONDS = 10800  # Kubernetes' default sessionAffinityConfig.clientIP.timeoutSeconds
TIMED_PERSISTENCE = frozenset({"UDP", "SCTP"})  # the protocols whose pools take a persistence timeout
# Kubernetes' probe defaults.
PROBE_PERIOD, PROBE_TIMEOUT, PROBE_FAILURES, PROBE_SUCCESSES = 10, 1, 3, 1
# cloud-provider-openstack's health monitor when enable-health-monitor asks for one and no probe says how.
MONITOR_DEFAULT_DELAY, MONITOR_DEFAULT_TIMEOUT, MONITOR_DEFAULT_RETRIES, MONITOR_DEFAULT_RETRIES_DOWN = 5, 3, 1, 3
# The Service status condition saying whether a LoadBalancer Service has its floating IP.
FLOATING_IP_CONDITION = "kuberaven.io/FloatingIPAssigned"
# The one saying whether every option the Service asks of its load balancer was applied (written once one was not).
OPTIONS_CONDITION = "kuberaven.io/LoadBalancerOptionsApplied"
# The one saying how a LoadBalancer Service's source ranges are enforced (source_ranges.py), while it has some.
SOURCE_RANGES_CONDITION = "kuberaven.io/SourceRangesEnforced"


@dataclass(frozen=True)
class ListenerSpec:
    name: str  # <load balancer>:<protocol>:<port>
    protocol: str  # TCP | UDP | SCTP, or HTTP with x-forwarded-for
    port: int
    members: tuple[MemberSpec, ...] = ()
    options: ListenerOptions = field(default_factory=ListenerOptions)
    pool_protocol: str | None = None  # PROXY with proxy-protocol; None: the listener's protocol

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
    # From cloud-provider-openstack's annotations (lb_annotations.py):
    flavor_id: str | None = None  # at creation: Octavia cannot change them later
    availability_zone: str | None = None
    keep_floating_ip: bool = False  # released, not deleted, when the Service no longer wants it
    floating_network: str | None = None  # the external network to take it from; None: the configured one
    floating_subnet: str | None = None
    member_subnet: str | None = None  # the subnet members are on; None: their namespace's
    source_ranges: tuple[str, ...] = ()  # loadBalancerSourceRanges (type LoadBalancer)
    # (annotation, why its value was left out)
    option_errors: tuple[tuple[str, str], ...] = ()

    def digest(self) -> str:
        """A short fingerprint: equal specs need no backend call."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ReadinessCheck:
    """A pod's readiness probe as a health monitor, and the port it probes."""

    monitor: HealthMonitor
    port: int


def translated(service: dict[str, Any], proxy_name: str | None = SERVICE_PROXY_NAME) -> bool:
    """Whether a Service gets a load balancer: one of TRANSLATED_SERVICE_TYPES with a cluster IP, not being
    deleted, not default/kubernetes, not labelled headless, and with no service-proxy-name label or one naming
    ``proxy_name`` (None or empty: none is ours)."""
    meta, spec = service["metadata"], service.get("spec", {})
    if (meta["namespace"], meta["name"]) in SKIPPED_SERVICES or meta.get("deletionTimestamp"):
        return False
    labels = meta.get("labels") or {}
    if HEADLESS_LABEL in labels:
        return False
    if SERVICE_PROXY_NAME_LABEL in labels and (not proxy_name or labels[SERVICE_PROXY_NAME_LABEL] != proxy_name):
        return False
    cluster_ip = spec.get("clusterIP")
    return spec.get("type", "ClusterIP") in TRANSLATED_SERVICE_TYPES and bool(cluster_ip) and cluster_ip != "None"


def wants_cleanup_finalizer(
    service: dict[str, Any], proxy_name: str | None = SERVICE_PROXY_NAME, load_balancer_class: str | None = None
) -> bool:
    """Whether a Service should carry LOAD_BALANCER_CLEANUP: while it is a translated LoadBalancer Service of
    kuberaven's class (see service_load_balancer). Once it is not (deleted, another type or class, a label),
    the finalizer goes after what it had is gone."""
    spec = service.get("spec", {})
    return spec.get("type") == LOAD_BALANCER and _ours(spec, load_balancer_class) and translated(service, proxy_name)


def _ours(spec: dict[str, Any], load_balancer_class: str | None) -> bool:
    """Whether a LoadBalancer Service's class is kuberaven's: none, or ``load_balancer_class``."""
    return spec.get("loadBalancerClass") in (None, load_balancer_class)


def service_load_balancer(
    service: dict[str, Any],
    endpoints: dict[str, Any] | None,
    check: ReadinessCheck | None = None,
    load_balancer_class: str | None = None,
    proxy_name: str | None = SERVICE_PROXY_NAME,
) -> LoadBalancerSpec | None:
    """The load balancer a Service should have, or None (see translated(), and ``proxy_name`` there).

    ``load_balancer_class``: the spec.loadBalancerClass kuberaven implements; a LoadBalancer Service of
    another class keeps its VIP load balancer but gets no floating IP (another controller gives it one).
    """
    if not translated(service, proxy_name):
        return None
    meta, spec = service["metadata"], service["spec"]
    lb_name = f"{meta['namespace']}/{meta['name']}"
    is_lb = spec.get("type") == LOAD_BALANCER
    local = is_lb and spec.get("externalTrafficPolicy") == "Local"
    asked = load_balancer_annotations(service)
    monitor = health_monitor(check, asked.monitor)
    ready = _ready_endpoints(endpoints, local, check.port if check and monitor else None)
    ranges = source_ranges(spec) if is_lb else ()
    listeners = []
    for port in spec.get("ports", []):
        protocol = port.get("protocol", "TCP")
        members = ready.get((port.get("name") or "", protocol), ())
        http = asked.x_forwarded_for and protocol == "TCP"
        options = ListenerOptions(
            ranges, persistence(spec, protocol), monitor, asked.lb_method, asked.connection_limit, asked.timeouts, http
        )
        listeners.append(
            ListenerSpec(
                f"{lb_name}:{protocol}:{port['port']}",
                "HTTP" if http else protocol,
                int(port["port"]),
                tuple(sorted(members, key=lambda m: m.key)),
                options,
                "PROXY" if asked.proxy_protocol and protocol == "TCP" else None,
            )
        )
    floating = is_lb and _ours(spec, load_balancer_class) and not asked.internal
    return LoadBalancerSpec(
        lb_name,
        spec["clusterIP"],
        tuple(listeners),
        floating_ip=floating,
        floating_address=(spec.get("loadBalancerIP") or None) if floating else None,
        flavor_id=asked.flavor_id,
        availability_zone=asked.availability_zone,
        keep_floating_ip=asked.keep_floating_ip,
        floating_network=asked.floating_network_id,
        floating_subnet=asked.floating_subnet_id,
        member_subnet=asked.member_subnet_id,
        source_ranges=ranges,
        option_errors=asked.errors,
    )


def health_monitor(check: ReadinessCheck | None, asked: MonitorOverrides) -> HealthMonitor | None:
    """The pools' health monitor: the readiness probe's, as the health-monitor annotations change it.

    enable-health-monitor "false": none; "true" with no probe to follow: TCP on the members' port with
    cloud-provider-openstack's defaults; the timings, when given, replace the probe's.
    """
    if asked.enabled is False:
        return None
    if check is not None:
        base = check.monitor
    elif asked.enabled:
        base = HealthMonitor(
            "TCP", MONITOR_DEFAULT_DELAY, MONITOR_DEFAULT_TIMEOUT, MONITOR_DEFAULT_RETRIES, MONITOR_DEFAULT_RETRIES_DOWN
        )
    else:
        return None
    delay = asked.delay or base.delay
    return replace(
        base,
        delay=delay,
        timeout=min(asked.timeout or base.timeout, delay),
        max_retries=asked.max_retries or base.max_retries,
        max_retries_down=asked.max_retries_down or base.max_retries_down,
    )


def persistence(spec: dict[str, Any], protocol: str) -> Persistence | None:
    """sessionAffinity: ClientIP as SOURCE_IP persistence: its timeout where the pool's protocol takes one in
    Octavia, and as client_timeout whatever the protocol (what OVN's affinity_timeout takes)."""
    if spec.get("sessionAffinity") != CLIENT_IP:
        return None
    client_ip = (spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}
    seconds = int(client_ip.get("timeoutSeconds") or DEFAULT_AFFINITY_SECONDS)
    return Persistence(SOURCE_IP, seconds if protocol in TIMED_PERSISTENCE else None, client_timeout=seconds)


def source_ranges(spec: dict[str, Any]) -> tuple[str, ...]:
    """loadBalancerSourceRanges, in a stable order (the API server has checked they are CIDRs)."""
    return tuple(sorted({cidr.strip() for cidr in spec.get("loadBalancerSourceRanges") or [] if cidr.strip()}))


def _ready_endpoints(
    endpoints: dict[str, Any] | None, local: bool, monitor_port: int | None
) -> dict[tuple[str, str], list[MemberSpec]]:
    """Ready addresses per (port name, protocol) — how an Endpoints port matches its Service port.

    ``local`` (externalTrafficPolicy: Local): only addresses on a node (nodeName set) serve.
    """
    found: dict[tuple[str, str], list[MemberSpec]] = {}
    if not endpoints:
        return found
    namespace = endpoints["metadata"]["namespace"]
    for subset in endpoints.get("subsets") or []:
        addresses = [a for a in subset.get("addresses") or [] if a.get("nodeName") or not local]
        for port in subset.get("ports") or []:
            key, number = (port.get("name") or "", port.get("protocol", "TCP")), int(port["port"])
            monitored = monitor_port if monitor_port != number else None
            for address in addresses:
                target = (address.get("targetRef") or {}).get("name") or address["ip"]
                member = MemberSpec(f"{namespace}/{target}:{number}", address["ip"], number, monitored)
                found.setdefault(key, []).append(member)
    return found


def readiness_check(pod: dict[str, Any], target_ports: Iterable[int]) -> ReadinessCheck | None:
    """The pod's readiness probe as a health monitor: httpGet → HTTP(S), tcpSocket → TCP, others → None.

    The container serving one of ``target_ports`` is preferred; else the first with a probe.
    """
    containers = [c for c in pod.get("spec", {}).get("containers") or [] if c.get("readinessProbe")]
    wanted = set(target_ports)
    serving = [c for c in containers if wanted & {p.get("containerPort") for p in c.get("ports") or []}]
    if not (serving or containers):
        return None
    container = (serving or containers)[0]
    probe = container["readinessProbe"]
    action = probe.get("httpGet") or probe.get("tcpSocket")
    if action is None:
        return None
    port = _container_port(container, action.get("port"))
    if port is None:
        return None
    delay = int(probe.get("periodSeconds") or PROBE_PERIOD)
    monitor = HealthMonitor(
        type=("HTTPS" if probe["httpGet"].get("scheme") == "HTTPS" else "HTTP") if "httpGet" in probe else "TCP",
        delay=delay,
        timeout=min(int(probe.get("timeoutSeconds") or PROBE_TIMEOUT), delay),
        max_retries=_retries(probe.get("successThreshold"), PROBE_SUCCESSES),
        max_retries_down=_retries(probe.get("failureThreshold"), PROBE_FAILURES),
        url_path=(probe["httpGet"].get("path") or "/") if "httpGet" in probe else None,
    )
    return ReadinessCheck(monitor, port)


def _container_port(container: dict[str, Any], port: int | str | None) -> int | None:
    """A probe's port: a number, or the name of one of the container's ports (None: no such port)."""
    if isinstance(port, int):
        return port
    if isinstance(port, str) and port.isdigit():
        return int(port)
    return next((int(p["containerPort"]) for p in container.get("ports") or [] if p.get("name") == port), None)


def _retries(value: int | None, default: int) -> int:
    return max(MIN_RETRIES, min(MAX_RETRIES, int(value or default)))


def endpoint_pods(endpoints: dict[str, Any] | None) -> list[tuple[str, str | None]]:
    """The pods behind a Service (ready or not) as (name, uid): one is read for the readiness probe."""
    found = set()
    for subset in (endpoints or {}).get("subsets") or []:
        for address in (subset.get("addresses") or []) + (subset.get("notReadyAddresses") or []):
            ref = address.get("targetRef") or {}
            if ref.get("kind") == "Pod" and ref.get("name"):
                found.add((str(ref["name"]), ref.get("uid")))
    return sorted(found, key=lambda pod: pod[0])


def endpoint_ports(endpoints: dict[str, Any] | None) -> set[int]:
    """The ports the Service's pods serve on (its target ports, as the Endpoints resolved them)."""
    return {int(p["port"]) for s in (endpoints or {}).get("subsets") or [] for p in s.get("ports") or []}


def floating_ip_condition(
    conditions: list[dict[str, Any]], address: str | None, error: str | None, reason: str, now: str
) -> dict[str, Any] | None:
    """The Service's FLOATING_IP_CONDITION saying whether its floating IP was had (and why not),
    or None when the one it has says so already (its lastTransitionTime moves only with its status)."""
    message = f"floating IP {address}" if address else f"no floating IP: {error}"
    return _condition(conditions, FLOATING_IP_CONDITION, bool(address), reason, message, now)


def options_condition(conditions: list[dict[str, Any]], problems: list[str], now: str) -> dict[str, Any] | None:
    """The Service's OPTIONS_CONDITION: False naming each option left out (unreadable, or refused by the
    provider), True once none is; None when there is nothing to say or it says so already."""
    if not problems and not any(c.get("type") == OPTIONS_CONDITION for c in conditions):
        return None  # never had a problem: no condition at all
    if problems:
        return _condition(conditions, OPTIONS_CONDITION, False, "OptionsLeftOut", "; ".join(problems), now)
    return _condition(conditions, OPTIONS_CONDITION, True, "Applied", "every option applied", now)


def source_ranges_condition(
    conditions: list[dict[str, Any]], how: str | None, message: str | None, now: str
) -> dict[str, Any] | None:
    """The Service's SOURCE_RANGES_CONDITION: how its loadBalancerSourceRanges hold (``how``, the reason;
    True when they hold for every client through its external address); None when it says so already."""
    if how is None or message is None:
        return None
    return _condition(conditions, SOURCE_RANGES_CONDITION, how in ENFORCED, how, message, now)


def _condition(
    conditions: list[dict[str, Any]], kind: str, ok: bool, reason: str, message: str, now: str
) -> dict[str, Any] | None:
    """A status condition of ``kind`` as wanted, or None when the current one says so already
    (its lastTransitionTime moves only with its status)."""
    status = "True" if ok else "False"
    wanted = {"type": kind, "status": status, "reason": reason, "message": message}
    current = next((c for c in conditions if c.get("type") == kind), None)
    if current is not None and all(current.get(k) == v for k, v in wanted.items()):
        return None
    kept = current is not None and current.get("status") == status
    return {**wanted, "lastTransitionTime": (current or {}).get("lastTransitionTime", now) if kept else now}
