"""What can-reach reads of a backend (network/drivers/): what it holds now, by id.

    reach_store.py ──► ReachReads.read_ports / read_rules / read_load_balancer ──► views.py values
        backends/embedded_views.py | backends/openstack_views.py

Read-only: what the backend holds, not what the translation meant to make.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..views import LoadBalancerView, PortView
from .security_groups import SecurityGroupRule


class ReachReads(Protocol):
    def read_ports(self, ports: Sequence[str]) -> dict[str, PortView]:
        """The ports of these ids that exist, by id: address and security groups as the backend holds them."""

    def read_rules(self, groups: Sequence[str]) -> dict[str, list[SecurityGroupRule]]:
        """The rules of these security groups, by group id (a missing group: none)."""

    def read_load_balancer(self, load_balancer: str) -> LoadBalancerView | None:
        """A load balancer with its listeners' source ranges and members and its floating IPs; None: gone."""
