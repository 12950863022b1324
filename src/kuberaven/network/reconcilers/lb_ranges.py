"""Where a Service's source ranges hold besides the listeners (network/reconcilers/, blocking: run in the
translation's threads by loadbalancers.py): on its members' ports, for the providers that keep the client's
address and have no allowed_cidrs; and at the source, for the cluster's pods that come through its ingress
address.

    loadbalancers.py ──► MemberRanges.cluster_group(): the cluster's group, its rules kept to the cluster's CIDRs
                     ──► ranges_group(): the Service's group, its ranges on its members' target ports
                     ──► sync(): each exposed (or no longer exposed) pod's port ──► member_groups() over the
                         states of its namespace's Services (source_ranges.py) ──► its groups, its Pod row
                     ──► Enforcement: how they hold, and on which members they do not, why

    loadbalancers.py ──► MemberRanges.at_source(): the Service's filters (source_filters.py: its ranges at its
                         ingress address, its listeners without a member) ──► the backend: every pods' network
                         of the cluster refuses them (namespaces.py copies them onto a network made later)

network_policies.py applies the same member_groups() to the ports it keeps,
so either writer gives a port the same groups.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..backend import INFRASTRUCTURE, SourceFilter, tags
from ..rules.source_ranges import (
    CLUSTER_GROUP,
    EXPOSED_PODS,
    RANGES_GROUP,
    Enforcement,
    by_member_groups,
    cluster_group_name,
    in_cluster_rules,
    member_groups,
    port_groups_with_ranges,
    ranges_group_name,
    ranges_rules,
    unselected,
)
from .context import TranslationContext

SELECTED = "a NetworkPolicy selects it: the policy's rules decide who reaches it"
OPEN = "a LoadBalancer Service without source ranges exposes it too"
NO_PORT = "no port of the cluster's"


class MemberRanges:
    def __init__(self, context: TranslationContext) -> None:
        self.store = context.store
        self.backend = context.backend
        self.cluster = context.cluster
        self.made: tuple[str, tuple[str, ...]] | None = None  # the cluster's group, and the CIDRs its rules have

    def cluster_group(self, cidrs: tuple[str, ...]) -> str:
        if self.made is None or self.made[1] != cidrs:
            name = cluster_group_name(self.cluster)
            group = self.backend.ensure_security_group(name, tags(self.cluster, INFRASTRUCTURE))
            self.backend.set_security_group_rules(group, in_cluster_rules(cidrs))
            self.made = (group, cidrs)
        return self.made[0]

    def ranges_group(
        self, service: str, uid: str, ranges: Sequence[str], ports: Iterable[tuple[str, int]], made: str | None
    ) -> str:
        group = made or self.backend.ensure_security_group(ranges_group_name(service), tags(self.cluster, uid))
        self.backend.set_security_group_rules(group, ranges_rules(ranges, ports))
        return group

    def sync(
        self, namespace: str, uid: str, mine: dict[str, Any], gone: Iterable[str], ranges: Sequence[str]
    ) -> Enforcement | None:
        """The ports of the pods the Service of ``uid`` exposes (``mine``: what its state will say of its ranges)
        and of those it no longer exposes (``gone``), with the groups the namespace's Services give them; how the
        Service's ranges hold on its members (None: it has no ranges group)."""
        namespace_state = self.store.namespace_state(namespace)
        if namespace_state is None:
            return None
        own = str(namespace_state["security_group"])
        rows = self.store.rows_in("Service", namespace)
        services = [dict(row.state) for row in rows if row.uid != uid] + [dict(mine)]
        # Ours: the groups any of them gives, now or as saved (the Service's own, which it may be dropping).
        ours = {
            str(s[k]) for s in [*services, *(r.state for r in rows)] for k in (RANGES_GROUP, CLUSTER_GROUP) if s.get(k)
        }
        exposed = set(mine.get(EXPOSED_PODS) or [])
        group = mine.get(RANGES_GROUP)
        covered, left_out = 0, {}
        for pod in sorted(exposed | set(gone)):
            why, groups = self._sync_pod(namespace, pod, own, ours, services)
            if pod not in exposed:
                continue
            if why is None and group in groups:
                covered += 1
            else:
                left_out[pod] = why or OPEN
        return by_member_groups(ranges, covered, left_out) if group else None

    def at_source(self, uid: str, filters: Sequence[SourceFilter], had: bool) -> str | None:
        """Every pods' network of the cluster refuses ``filters`` (source_filters.py) of the Service of ``uid``
        and nothing else of it; ``had``: its state says some were set. None when they hold (or there are none),
        else why they cannot."""
        if not filters and not had:
            return None
        networks = [str(row.state["network"]) for row in self.store.rows_of("Namespace")] if filters else []
        return self.backend.set_source_filters(self.cluster, uid, networks, filters)

    def _sync_pod(
        self, namespace: str, pod: str, own: str, ours: set[str], services: list[dict[str, Any]]
    ) -> tuple[str | None, list[str]]:
        """A pod's port with the groups member_groups() gives, and them; why it was left as it is, if it was."""
        rows = self.store.rows_named("Pod", namespace, pod)
        state = dict(rows[0].state) if rows else {}
        current = list(state.get("security_groups") or [])
        if not state.get("port"):
            return NO_PORT, current
        if not unselected(current, own, ours):
            return SELECTED, current
        wanted = port_groups_with_ranges([own], own, member_groups(pod, services))
        if wanted != current:
            self.backend.set_port_security_groups(str(state["port"]), wanted)
            self.store.update_state("Pod", rows[0].uid, {"port": state["port"]}, {"security_groups": wanted})
        return None, wanted
