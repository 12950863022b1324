"""Where a Service's source ranges hold besides the listeners (network/reconcilers/, blocking: run in the
translation's threads by loadbalancers.py): on its members' ports, for the providers that keep the client's
address and have no allowed_cidrs; and at the source, for the cluster's pods that come through its ingress
address.

    loadbalancers.py ──► MemberRanges.on_members(): the three below, for a provider that keeps the client's address
                     ──► cluster_group(): the cluster's group, its rules kept to the cluster's CIDRs
                     ──► ranges_group(): the Service's group, its ranges on its members' target ports
                     ──► sync(): what the Service's state will say of its ranges, kept in memory by namespace
                         (loaded at start from the Services' rows) ──► each exposed (or no longer exposed) pod
                         whose port lacks the groups member_groups() (source_ranges.py) gives it over them:
                         queued to the pods reconciler (pods.py), which gives its port those groups
                         (member_groups() here: its input); Waiting until every exposed pod's port carries
                         them, so no member is added before its port is held to the ranges
                     ──► Enforcement: how they hold, and on which members they do not, why

    loadbalancers.py ──► MemberRanges.at_source(): the Service's filters (source_filters.py: its ranges at its
                         ingress address, its listeners without a member) ──► the backend: every pods' network
                         of the cluster refuses them (namespaces.py copies them onto a network made later)

A pod's port and its groups are the pods reconciler's alone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...watch.workqueue import Waiting
from ..backend import INFRASTRUCTURE, tags
from ..drivers.source_filters import SourceFilter
from ..rules.reach_service import TRANSPORT
from ..rules.services import LoadBalancerSpec
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
EXPOSURE = (EXPOSED_PODS, RANGES_GROUP, CLUSTER_GROUP)  # what member_groups() reads of a Service's state
SHOWN = 3  # pods named in a Waiting's message


class MemberRanges:
    def __init__(self, context: TranslationContext) -> None:
        self.store = context.store
        self.backend = context.backend
        self.cluster = context.cluster
        self.pod_queue = context.pod_queue
        self.made: tuple[str, tuple[str, ...]] | None = None  # the cluster's group, and the CIDRs its rules have
        # Per namespace, each Service's EXPOSURE fields as its last sync decided them (saved or about to be): what
        # the pods reconciler reads, from its own tasks, while syncs write it from worker threads.
        self._exposing: dict[str, dict[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        """The exposure of the Services translated before (blocking; before any pod is reconciled)."""
        rows = self.store.rows_of("Service")
        with self._lock:
            for row in rows:
                self._expose(row.namespace or "", row.uid, row.state)

    def on_members(
        self,
        spec: LoadBalancerSpec,
        meta: dict[str, Any],
        on_members: bool,
        previous: dict[str, Any] | None,
        cluster: tuple[str, ...],
    ) -> tuple[dict[str, Any], Enforcement | None]:
        """Blocking. With a provider that keeps the client's address (``on_members``): the pods the Service exposes, its
        ranges group (with ranges) and the cluster's, each exposed pod's port with the groups that gives, before
        any member is added; pods no longer exposed get their namespace's group back. What the state keeps of it,
        and how the ranges hold."""
        before = previous or {}
        exposed = sorted({_pod_of(m.name) for each in spec.listeners for m in each.members}) if on_members else []
        fields: dict[str, Any] = {EXPOSED_PODS: exposed, RANGES_GROUP: None, CLUSTER_GROUP: None}
        if on_members and spec.source_ranges:
            ports = [
                (TRANSPORT.get(each.protocol.upper(), "tcp"), m.port) for each in spec.listeners for m in each.members
            ]
            fields[CLUSTER_GROUP] = self.cluster_group(cluster)
            fields[RANGES_GROUP] = self.ranges_group(
                spec.name, meta["uid"], spec.source_ranges, ports, before.get(RANGES_GROUP)
            )
        gone = set(before.get(EXPOSED_PODS) or []) - set(exposed)
        enforcement = None
        if exposed or gone:
            enforcement = self.sync(meta["namespace"], meta["uid"], fields, gone, spec.source_ranges)
        if before.get(RANGES_GROUP) and before[RANGES_GROUP] != fields[RANGES_GROUP]:
            self.backend.delete("security_group", str(before[RANGES_GROUP]))
        return fields, enforcement

    def member_groups(self, namespace: str, pod: str) -> tuple[str, ...] | None:
        """The groups the Services of ``namespace`` give the pod's port in place of its namespace's (None: none):
        the pods reconciler's input."""
        with self._lock:
            services = list((self._exposing.get(namespace) or {}).values())
        return member_groups(pod, services)

    def _expose(self, namespace: str, uid: str, state: Mapping[str, Any]) -> dict[str, Any]:
        """A Service's exposure as ``state`` says it (under the lock); the one it replaced ({}: none)."""
        services = self._exposing.setdefault(namespace, {})
        before = services.pop(uid, {})
        if state.get(EXPOSED_PODS):
            services[uid] = {field: state.get(field) for field in EXPOSURE}
        elif not services:
            del self._exposing[namespace]
        return before

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
        """The Service of ``uid`` exposes the pods ``mine`` names (what its state will say of its ranges) and no
        longer those of ``gone``: the pods whose ports that gives other groups are queued to the pods reconciler;
        Waiting until each exposed pod's port carries its groups. How the Service's ranges hold on its members
        (None: it has no ranges group)."""
        with self._lock:
            before = self._expose(namespace, uid, mine)
            services = list((self._exposing.get(namespace) or {}).values())
        namespace_state = self.store.namespace_state(namespace)
        if namespace_state is None:
            return None
        own = str(namespace_state["security_group"])
        saved = [row.state for row in self.store.rows_in("Service", namespace)]
        # Ours: the groups any of them gives, now or as saved (the Service's own, which it may be dropping).
        ours = {str(s[k]) for s in [*services, *saved] for k in (RANGES_GROUP, CLUSTER_GROUP) if s.get(k)}
        exposed = set(mine.get(EXPOSED_PODS) or [])
        leaving = (set(gone) | set(before.get(EXPOSED_PODS) or [])) - exposed
        group = mine.get(RANGES_GROUP)
        covered, left_out, unsettled = 0, {}, []
        for pod in sorted(exposed | leaving):
            why, groups = self._pod(namespace, pod, own, ours, services)
            if why is None and groups is None:
                self.pod_queue(f"{namespace}/{pod}")
                unsettled += [pod] if pod in exposed else []
            elif pod in exposed and why is None and group in (groups or []):
                covered += 1
            elif pod in exposed:
                left_out[pod] = why or OPEN
        if unsettled:
            shown = ", ".join(unsettled[:SHOWN]) + (" …" if len(unsettled) > SHOWN else "")
            raise Waiting(f"the ports of {len(unsettled)} pods of {namespace} ({shown}) lack their groups yet")
        return by_member_groups(ranges, covered, left_out) if group else None

    def at_source(self, uid: str, filters: Sequence[SourceFilter], had: bool) -> str | None:
        """Every pods' network of the cluster refuses ``filters`` (source_filters.py) of the Service of ``uid``
        and nothing else of it; ``had``: its state says some were set. None when they hold (or there are none),
        else why they cannot."""
        if not filters and not had:
            return None
        networks = [str(row.state["network"]) for row in self.store.rows_of("Namespace")] if filters else []
        return self.backend.set_source_filters(self.cluster, uid, networks, filters)

    def _pod(
        self, namespace: str, pod: str, own: str, ours: set[str], services: list[dict[str, Any]]
    ) -> tuple[str | None, list[str] | None]:
        """Why a pod's port is left as it is, if it is, and its groups; (None, None): its port lacks the groups
        member_groups() gives it (the pods reconciler gives them)."""
        rows = self.store.rows_named("Pod", namespace, pod)
        state = dict(rows[0].state) if rows else {}
        current = list(state.get("security_groups") or [])
        if not state.get("port"):
            return NO_PORT, current
        if not unselected(current, own, ours):
            return SELECTED, current
        wanted = port_groups_with_ranges([own], own, member_groups(pod, services))
        return (None, current) if set(wanted) == set(current) else (None, None)


def _pod_of(member: str) -> str:
    """The pod (or address) a member is named after: namespace/pod:port."""
    return member.rpartition(":")[0].partition("/")[2]
