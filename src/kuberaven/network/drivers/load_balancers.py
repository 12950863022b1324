"""The load balancers driver (network/drivers/): a Service's load balancer, listeners, pools and members.

    reconcilers/loadbalancers.py ──► LoadBalancerDriver
        ensure_load_balancer (waits for ACTIVE) ──► listeners / create_listener / delete_listener
        ──► ensure_listener_options (rules/services.py's ListenerOptions) ──► set_members (one change)
    backends/octavia.py (Octavia) | backends/embedded_lbs.py (kuberaven's tables)

The values here are what a Service's options become on a listener and its
pool (rules/services.py, rules/lb_annotations.py make them; octavia_fields.py
turns them into Octavia's fields).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


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


class LoadBalancerDriver(Protocol):
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
