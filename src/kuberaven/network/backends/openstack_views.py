"""What can-reach reads of OpenStack (network/backends/): Neutron's ports, groups and rules, Octavia's load balancers.

    reach_store.py ──► OpenStackBackend (openstack.py) ──► OpenStackViews.read_ports / read_rules / read_load_balancer
        ──► Neutron: ports (fixed IP, security_group_ids), security group rules, floating IPs on the VIP port
        ──► Octavia: the load balancer (its provider), listeners (allowed_cidrs), pools' members
        ──► views.py values

Read-only: what the cloud holds now, not what the translation meant to make
(a source range the provider refused is absent here, and can-reach says so).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ..drivers.security_groups import ANY_IPV4, ANY_IPV6, SecurityGroupRule
from ..views import ListenerView, LoadBalancerView, MemberView, PortView
from .openstack_context import OpenStackContext

CHUNK = 100  # ids a listing filters on: a query string of them stays well below URL limits


def _chunks(ids: Sequence[str]) -> list[list[str]]:
    unique = sorted(set(ids))
    return [unique[start : start + CHUNK] for start in range(0, len(unique), CHUNK)]


def rule_of(rule: Any) -> SecurityGroupRule:
    """A Neutron rule; no remote prefix is any address (Neutron's default rules have none)."""
    remote = rule.remote_ip_prefix or (ANY_IPV6 if rule.ether_type == "IPv6" else ANY_IPV4)
    return SecurityGroupRule(
        rule.direction, remote, rule.protocol, rule.port_range_min, rule.port_range_max, rule.description or ""
    )


class OpenStackViews:
    """ReachReads on Neutron and Octavia: what can-reach reads (NetworkBackend.read_*)."""

    def __init__(self, context: OpenStackContext) -> None:
        self.context = context
        self.net = context.net
        self.lbaas = context.lbaas

    def read_ports(self, ports: Sequence[str]) -> dict[str, PortView]:
        found = self.context.call("ports", lambda: [p for chunk in _chunks(ports) for p in self.net.ports(id=chunk)])
        return {
            p.id: PortView(p.id, p.fixed_ips[0]["ip_address"] if p.fixed_ips else "", tuple(p.security_group_ids or ()))
            for p in found
        }

    def read_rules(self, groups: Sequence[str]) -> dict[str, list[SecurityGroupRule]]:
        found: dict[str, list[SecurityGroupRule]] = {g: [] for g in groups}
        listed = self.context.call(
            "security group rules",
            lambda: [r for chunk in _chunks(groups) for r in self.net.security_group_rules(security_group_id=chunk)],
        )
        for rule in listed:
            if rule.security_group_id in found:
                found[rule.security_group_id].append(rule_of(rule))
        return found

    def read_load_balancer(self, load_balancer: str) -> LoadBalancerView | None:
        lb = self.context.call(
            f"load balancer {load_balancer}",
            lambda: self.lbaas.find_load_balancer(load_balancer, ignore_missing=True),
        )
        if lb is None:
            return None
        listeners = []
        for ref in lb.listeners or []:
            listener = self.context.call(f"listener {ref['id']}", functools.partial(self.lbaas.get_listener, ref["id"]))
            pool = listener.default_pool_id
            members = (
                self.context.call(f"members of {listener.name}", functools.partial(self._members, pool)) if pool else []
            )
            listeners.append(
                ListenerView(
                    listener.name,
                    listener.protocol,
                    listener.protocol_port,
                    tuple(listener.allowed_cidrs or ()),
                    tuple(MemberView(m.name or "", m.address, m.protocol_port) for m in members),
                )
            )
        return LoadBalancerView(
            lb.id, lb.name, lb.vip_address, lb.provider, self._floating_addresses(lb), tuple(listeners)
        )

    def _floating_addresses(self, lb: Any) -> tuple[str, ...]:
        """The floating IPs on the VIP port: Octavia's, or the one made for it when Octavia made none."""
        made = self.context.call(
            f"VIP port of {lb.name}", lambda: list(self.net.ports(name=f"{lb.name}:vip", device_id=lb.id))
        )
        ports = sorted({p for p in [lb.vip_port_id, *(port.id for port in made)] if p})
        found = self.context.call("floating IPs", lambda: [f for port in ports for f in self.net.ips(port_id=port)])
        return tuple(sorted(f.floating_ip_address for f in found))

    def _members(self, pool: str) -> list[Any]:
        return list(self.lbaas.members(pool))
