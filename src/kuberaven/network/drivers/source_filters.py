"""The source filters driver (network/drivers/): what the pods' networks refuse where it is sent.

reconcilers/lb_ranges.py (a Service's source ranges, rules/source_filters.py) ──► set_source_filters
reconcilers/namespaces.py (a network just made) ──► copy_source_filters
    ──► backends/openstack.py: ACLs on the pods' logical switches in OVN (ovn_northbound.py)
    ──► backends/embedded.py: nothing (it has no data path), said on the Service
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

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


class SourceFilterDriver(Protocol):
    def set_source_filters(
        self, cluster: str, owner: str, networks: Sequence[str], filters: Sequence[SourceFilter]
    ) -> str | None:
        """The pods' ``networks`` refuse ``filters`` (those of ``owner``, a Service's uid), and no other network
        keeps the owner's (no filters: they go). None when they hold, else why they cannot (said on the Service)."""

    def copy_source_filters(self, cluster: str, network: str) -> None:
        """A network just made refuses what the cluster's other pods' networks refuse."""
