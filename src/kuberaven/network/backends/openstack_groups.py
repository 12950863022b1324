"""Neutron's security groups for the OpenStack backend (network/backends/): groups, their rules, a port's groups.

    reconcilers/ ──► OpenStackBackend (openstack.py) ──► NeutronSecurityGroups ──► Neutron:
        a group found or made; its rules made to match a list; an ingress rule; a port's groups; a group deleted

A group's rules are replaced by removing the unwanted first (Neutron refuses a
rule for traffic a rule it has already covers). Ports' groups change, and
groups are deleted, one at a time (``_changes``): ML2/OVN commits a port's new
groups to its database, then moves the port between OVN's port groups; a
group deleted in between (its last port just left it) fails the move, and OVN
keeps the port out of its new groups until Neutron's maintenance repairs it
minutes later.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from ..backend import BackendError
from ..drivers.security_groups import SecurityGroupRule
from .openstack_context import OpenStackContext
from .openstack_views import rule_of


class NeutronSecurityGroups:
    """SecurityGroupDriver on Neutron; also deletes groups (under the same lock as ports' group changes)."""

    def __init__(self, context: OpenStackContext) -> None:
        self.context = context
        self.net = context.net
        self._changes = threading.Lock()  # ports' group changes and groups' deletions: one at a time

    def ensure_security_group(self, name: str, tags: list[str]) -> str:
        def existing() -> Iterable[Any]:
            return self.net.security_groups(name=name, project_id=self.context.project)

        made = self.context.ensure(f"security group {name}", existing, self.net.create_security_group, tags, name=name)
        return str(made.id)

    def ensure_ingress_rule(self, group: str, remote_cidr: str) -> None:
        def existing() -> list[Any]:
            rules = self.net.security_group_rules(security_group_id=group, direction="ingress")
            return [r for r in rules if r.remote_ip_prefix == remote_cidr and r.protocol is None]

        if not self.context.call(f"rules of security group {group}", existing):
            self.context.call(
                f"ingress rule from {remote_cidr}",
                lambda: self.net.create_security_group_rule(
                    security_group_id=group, direction="ingress", ethertype="IPv4", remote_ip_prefix=remote_cidr
                ),
            )

    def _rules(self, group: str) -> list[Any]:
        return list(
            self.context.call(
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
            self._create_rule(group, rule)

    def _create_rule(self, group: str, rule: SecurityGroupRule) -> None:
        ports = {"port_range_min": rule.port_min, "port_range_max": rule.port_max} if rule.port_min else {}
        errors = self.context.errors
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
        except errors.ConflictException:
            return  # made meanwhile by a retry
        except errors.SDKException as error:
            raise BackendError(f"rule {rule} of security group {group}: {error}") from error

    def _delete_rule(self, rule: str) -> None:
        self.context.call(
            f"deleting rule {rule}", lambda: self.net.delete_security_group_rule(rule, ignore_missing=True)
        )

    def set_port_security_groups(self, port: str, groups: list[str]) -> None:
        found = self.context.call(f"port {port}", lambda: self.net.get_port(port))
        if sorted(found.security_group_ids or []) != sorted(groups):
            with self._changes:
                self.context.call(
                    f"security groups of port {port}",
                    lambda: self.net.update_port(port, security_group_ids=list(groups)),
                )

    def delete_group(self, group: str) -> None:
        with self._changes:
            self.context.call(
                f"deleting security_group {group}",
                lambda: self.net.delete_security_group(group, ignore_missing=True),
            )
