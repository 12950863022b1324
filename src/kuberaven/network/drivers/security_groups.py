"""The security groups driver (network/drivers/): groups, their rules, and the groups a port carries.

reconcilers/namespaces.py, network_policies.py, lb_ranges.py ──► SecurityGroupDriver
    ensure_security_group / ensure_ingress_rule / set_security_group_rules / set_port_security_groups
rules/policy.py, source_ranges.py, reach.py ──► SecurityGroupRule (pure values)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

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


class SecurityGroupDriver(Protocol):
    def ensure_security_group(self, name: str, tags: list[str]) -> str: ...

    def ensure_ingress_rule(self, group: str, remote_cidr: str) -> None:
        """Security group ``group`` lets in any traffic from ``remote_cidr`` (idempotent)."""

    def security_group_rules(self, group: str) -> list[SecurityGroupRule]:
        """The rules of security group ``group``."""

    def set_security_group_rules(self, group: str, rules: list[SecurityGroupRule]) -> None:
        """Security group ``group`` has exactly ``rules``: others removed first, missing ones added (idempotent)."""

    def set_port_security_groups(self, port: str, groups: list[str]) -> None:
        """Port ``port`` carries exactly ``groups`` (idempotent)."""
