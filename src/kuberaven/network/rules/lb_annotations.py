"""cloud-provider-openstack's Service annotations ──► load balancer options (network/, pure functions).

    metadata.annotations["loadbalancer.openstack.org/*"], service.beta.kubernetes.io/openstack-internal-load-balancer,
    spec.loadBalancerClass
        ──► LoadBalancerAnnotations: what services.py puts on the load balancer, its listeners, pools, health
            monitor, members and floating IP; plus the annotations that could not be read, each with why

A Service written for cloud-provider-openstack's Octavia controller works
unchanged: each annotation means what it means there, wherever it applies to
a load balancer whose members are pods. A value that cannot be read is
reported (a Service condition and a Warning Event, by the translator) and
that annotation alone is left out; the rest of the load balancer is made.
No I/O here: unit tests feed recorded Services.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..drivers.load_balancers import Timeouts

PREFIX = "loadbalancer.openstack.org/"
INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
KEEP_FLOATING_IP = PREFIX + "keep-floatingip"
LB_METHOD = PREFIX + "lb-method"
CONNECTION_LIMIT = PREFIX + "connection-limit"
TIMEOUT_CLIENT_DATA = PREFIX + "timeout-client-data"
TIMEOUT_MEMBER_CONNECT = PREFIX + "timeout-member-connect"
TIMEOUT_MEMBER_DATA = PREFIX + "timeout-member-data"
TIMEOUT_TCP_INSPECT = PREFIX + "timeout-tcp-inspect"
PROXY_PROTOCOL = PREFIX + "proxy-protocol"
X_FORWARDED_FOR = PREFIX + "x-forwarded-for"
FLAVOR_ID = PREFIX + "flavor-id"
AVAILABILITY_ZONE = PREFIX + "availability-zone"
ENABLE_HEALTH_MONITOR = PREFIX + "enable-health-monitor"
MONITOR_DELAY = PREFIX + "health-monitor-delay"
MONITOR_TIMEOUT = PREFIX + "health-monitor-timeout"
MONITOR_MAX_RETRIES = PREFIX + "health-monitor-max-retries"
MONITOR_MAX_RETRIES_DOWN = PREFIX + "health-monitor-max-retries-down"
FLOATING_NETWORK_ID = PREFIX + "floating-network-id"
FLOATING_SUBNET_ID = PREFIX + "floating-subnet-id"
MEMBER_SUBNET_ID = PREFIX + "member-subnet-id"

# Every annotation read here: the Services' store keeps these keys (and no other annotation).
ANNOTATIONS = (
    INTERNAL,
    KEEP_FLOATING_IP,
    LB_METHOD,
    CONNECTION_LIMIT,
    TIMEOUT_CLIENT_DATA,
    TIMEOUT_MEMBER_CONNECT,
    TIMEOUT_MEMBER_DATA,
    TIMEOUT_TCP_INSPECT,
    PROXY_PROTOCOL,
    X_FORWARDED_FOR,
    FLAVOR_ID,
    AVAILABILITY_ZONE,
    ENABLE_HEALTH_MONITOR,
    MONITOR_DELAY,
    MONITOR_TIMEOUT,
    MONITOR_MAX_RETRIES,
    MONITOR_MAX_RETRIES_DOWN,
    FLOATING_NETWORK_ID,
    FLOATING_SUBNET_ID,
    MEMBER_SUBNET_ID,
)

# Octavia's pool algorithms (lb-method); the OVN provider offers SOURCE_IP_PORT only.
LB_METHODS = ("ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT")
# Octavia's bounds: a timeout in milliseconds, the retries of a health monitor.
MAX_TIMEOUT_MS = 31_536_000_000
MIN_RETRIES, MAX_RETRIES = 1, 10

T = TypeVar("T")


@dataclass(frozen=True)
class MonitorOverrides:
    """The health-monitor annotations: enabled or not (None: as the readiness probe says), and its timings."""

    enabled: bool | None = None
    delay: int | None = None
    timeout: int | None = None
    max_retries: int | None = None
    max_retries_down: int | None = None


@dataclass(frozen=True)
class LoadBalancerAnnotations:
    """What a Service's annotations ask of its load balancer; the defaults are "not asked"."""

    lb_method: str | None = None
    connection_limit: int | None = None  # -1: unlimited (Octavia's default)
    timeouts: Timeouts = field(default_factory=Timeouts)
    proxy_protocol: bool = False
    x_forwarded_for: bool = False
    flavor_id: str | None = None
    availability_zone: str | None = None
    monitor: MonitorOverrides = field(default_factory=MonitorOverrides)
    internal: bool = False  # no floating IP
    keep_floating_ip: bool = False  # the floating IP outlives the Service (released, not deleted)
    floating_network_id: str | None = None
    floating_subnet_id: str | None = None
    member_subnet_id: str | None = None
    # annotation ──► why its value was left out
    errors: tuple[tuple[str, str], ...] = ()


class _Reader:
    """Reads annotation values, keeping each unreadable one's error instead of raising."""

    def __init__(self, annotations: Mapping[str, str]) -> None:
        self.annotations = annotations
        self.errors: list[tuple[str, str]] = []

    def value(self, key: str, parse: Callable[[str], T]) -> T | None:
        raw = self.annotations.get(key)
        if raw is None:
            return None
        try:
            return parse(raw.strip())
        except ValueError as error:
            self.errors.append((key, f"{raw!r}: {error}"))
            return None

    def flag(self, key: str) -> bool | None:
        return self.value(key, _boolean)

    def text(self, key: str) -> str | None:
        return self.value(key, _non_empty)


def _boolean(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError("not a boolean (true or false)")


def _non_empty(raw: str) -> str:
    if not raw:
        raise ValueError("empty")
    return raw


def _bounded(low: int, high: int, what: str) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            number = int(raw)
        except ValueError:
            raise ValueError(f"not an integer ({what})") from None
        if not low <= number <= high:
            raise ValueError(f"{what} must be between {low} and {high}")
        return number

    return parse


def _lb_method(raw: str) -> str:
    method = raw.upper()
    if method not in LB_METHODS:
        raise ValueError(f"not one of {', '.join(LB_METHODS)}")
    return method


def _seconds(raw: str) -> int:
    """A health-monitor duration as cloud-provider-openstack takes it: seconds, or a Go duration such as "5s"."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for unit in ("ms", "s", "m", "h"):
        if raw.endswith(unit) and raw[: -len(unit)].isdigit():
            seconds = int(raw[: -len(unit)]) * units[unit]
            if seconds < 1 or seconds != int(seconds):
                raise ValueError("must be a whole number of seconds, at least 1")
            return int(seconds)
    return _bounded(1, 86_400, "seconds")(raw)


def load_balancer_annotations(service: dict[str, Any]) -> LoadBalancerAnnotations:
    """The Service's cloud-provider-openstack annotations, read; unreadable ones listed in ``errors``."""
    read = _Reader(service["metadata"].get("annotations") or {})
    timeout = _bounded(0, MAX_TIMEOUT_MS, "milliseconds")
    retries = _bounded(MIN_RETRIES, MAX_RETRIES, "retries")
    found = LoadBalancerAnnotations(
        lb_method=read.value(LB_METHOD, _lb_method),
        connection_limit=read.value(CONNECTION_LIMIT, _bounded(-1, 2**31 - 1, "connections; -1 is unlimited")),
        timeouts=Timeouts(
            read.value(TIMEOUT_CLIENT_DATA, timeout),
            read.value(TIMEOUT_MEMBER_CONNECT, timeout),
            read.value(TIMEOUT_MEMBER_DATA, timeout),
            read.value(TIMEOUT_TCP_INSPECT, timeout),
        ),
        proxy_protocol=bool(read.flag(PROXY_PROTOCOL)),
        x_forwarded_for=bool(read.flag(X_FORWARDED_FOR)),
        flavor_id=read.text(FLAVOR_ID),
        availability_zone=read.text(AVAILABILITY_ZONE),
        monitor=MonitorOverrides(
            read.flag(ENABLE_HEALTH_MONITOR),
            read.value(MONITOR_DELAY, _seconds),
            read.value(MONITOR_TIMEOUT, _seconds),
            read.value(MONITOR_MAX_RETRIES, retries),
            read.value(MONITOR_MAX_RETRIES_DOWN, retries),
        ),
        internal=bool(read.flag(INTERNAL)),
        keep_floating_ip=bool(read.flag(KEEP_FLOATING_IP)),
        floating_network_id=read.text(FLOATING_NETWORK_ID),
        floating_subnet_id=read.text(FLOATING_SUBNET_ID),
        member_subnet_id=read.text(MEMBER_SUBNET_ID),
    )
    if found.proxy_protocol and found.x_forwarded_for:
        read.errors.append((X_FORWARDED_FOR, "cannot be had with proxy-protocol (a PROXY pool is not HTTP)"))
        found = replace(found, x_forwarded_for=False)
    return replace(found, errors=tuple(read.errors))
