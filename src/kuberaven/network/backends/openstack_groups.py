"""Neutron's security-group rules for the OpenStack backend (network/backends/): a group's rules, a port's groups.

    translator ──► OpenStackBackend (openstack.py: the groups themselves) ──► NeutronSecurityGroups ──► Neutron:
        a group's rules made to match a list, an ingress rule, a port's groups

A group's rules are replaced by removing the unwanted first (Neutron refuses a
rule for traffic a rule it has already covers), and a port's groups change
under the backend's lock of group changes (openstack.py says why).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..backend import BackendError, SecurityGroupRule
from .openstack_views import rule_of


class NeutronSecurityGroups:
    """The security-group part of OpenStackBackend (a mixin: the connection and ``_call`` are its)."""

    net: Any
    errors: Any
    project: str
    _group_changes: threading.Lock

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        raise NotImplementedError

    def ensure_ingress_rule(self, group: str, remote_cidr: str) -> None:
        def existing() -> list[Any]:
            rules = self.net.security_group_rules(security_group_id=group, direction="ingress")
            return [r for r in rules if r.remote_ip_prefix == remote_cidr and r.protocol is None]

        if not self._call(f"rules of security group {group}", existing):
            self._call(
                f"ingress rule from {remote_cidr}",
                lambda: self.net.create_security_group_rule(
                    security_group_id=group, direction="ingress", ethertype="IPv4", remote_ip_prefix=remote_cidr
                ),
            )

    def _rules(self, group: str) -> list[Any]:
        return list(
            self._call(
                f"rules of security group {group}", lambda: list(self.net.security_group_rules(security_group_id=group))
            )
        )

    def security_group_rules(self, group: str) -> list[SecurityGroupRule]:
        return [rule_of(r) for r in self._rules(group)]

    def set_security_group_rules(self, group: str, rules: list[SecurityGroupRule]) -> None:
        # Removed first: Neutron refuses a rule for the same traffic as one it has, whatever its description.
        wanted = set(rules)
        kept = set()
        for existing in self._rules(group):
            rule = rule_of(existing)
            if rule in wanted and rule not in kept:
                kept.add(rule)
                continue
            self._delete_rule(existing.id)
        for rule in rules:
            if rule in kept:
                continue
            kept.add(rule)
            ports = {"port_range_min": rule.port_min, "port_range_max": rule.port_max} if rule.port_min else {}
            try:
                self.net.create_security_group_rule(
                    security_group_id=group,
                    direction=rule.direction,
                    ethertype=rule.ethertype,
                    protocol=rule.protocol,
                    remote_ip_prefix=rule.remote_cidr,
                    description=rule.description,
                    **ports,
                )
            except self.errors.ConflictException:
                continue  # made meanwhile by a retry
            except self.errors.SDKException as error:
                raise BackendError(f"rule {rule} of security group {group}: {error}") from error

    def _delete_rule(self, rule: str) -> None:
        self._call(f"deleting rule {rule}", lambda: self.net.delete_security_group_rule(rule, ignore_missing=True))

    def set_port_security_groups(self, port: str, groups: list[str]) -> None:
        found = self._call(f"port {port}", lambda: self.net.get_port(port))
        if sorted(found.security_group_ids or []) != sorted(groups):
            with self._group_changes:
                self._call(
                    f"security groups of port {port}",
                    lambda: self.net.update_port(port, security_group_ids=list(groups)),
                )
