"""What can-reach reads of a backend (network/): ports, load balancers, as the backend holds them now.

    reach_store.py ──► NetworkBackend.read_ports / read_rules / read_load_balancer
                         ├─► backends/embedded.py: the network_resource rows
                         └─► backends/openstack.py: Neutron's ports, groups, rules, floating IPs;
                                                    Octavia's listeners, pools, members, provider
                   ──► these plain values ──► rules/reach_service.py (pure)

Plain frozen values, no behaviour: the backends fill them, the pure rules
read them. Ids are strings whichever backend made them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PortView:
    """A port: its address and the security groups it carries."""

    id: str
    address: str
    security_groups: tuple[str, ...]


@dataclass(frozen=True)
class MemberView:
    name: str  # namespace/pod:port
    address: str
    port: int


@dataclass(frozen=True)
class ListenerView:
    """A listener with its source ranges and its pool's members."""

    name: str  # namespace/service:PROTOCOL:port
    protocol: str  # TCP, UDP, SCTP, HTTP …
    port: int
    allowed_cidrs: tuple[str, ...] = ()  # (): every source
    members: tuple[MemberView, ...] = ()


@dataclass(frozen=True)
class LoadBalancerView:
    """A load balancer, its floating IPs (those on its VIP port) and listeners."""

    id: str
    name: str  # namespace/service
    vip_address: str
    provider: str | None = None  # Octavia's provider (amphora, ovn …); None: the embedded backend
    floating_addresses: tuple[str, ...] = ()
    listeners: tuple[ListenerView, ...] = ()
