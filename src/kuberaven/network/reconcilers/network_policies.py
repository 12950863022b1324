"""NetworkPolicies (network/, a reconciler): policies, pods' and namespaces' labels ──► security groups, and the
groups each pod's port should carry.

    NetworkPolicy events (listed at every start: policies are few) ──► ("policy", namespace/name)
    Namespace events whose labels changed                          ──► every policy's key
    Pod events that change what policies read (labels, IP, named ports, whether it has a port)
                                                                   ──► every policy's key
    ──► reconcile(key), reading the policies, namespaces and pods listers (watch/store.py; the pods' and
        namespaces' stores are filled by one LIST each when a resumed informer has not given them all):
        policy_group() (policy.py) ──► its security group and rules (same digest: no call) ──► NetworkPolicy row
        (state.py) ──► the pods selected before or now: queued to the pods reconciler (pods.py)
        a policy gone (or made again under its name): its pods queued, and once no port of a pod carries its
        group any more, the group goes

    pods.py, reconciling a pod ──► policy_groups(): the groups of the policies selecting it (policy.py's
                                   policy_groups(), a pure function of the pod, its namespace's policies and
                                   the groups made); pods.py gives its port those (pod_network.py's pod_groups())

A pod's port and its groups are the pods reconciler's alone: this one makes
the policies' groups and says which a pod should carry. What is kept here is
the translation's own: the groups made (``made``), the pods each policy
selected at its last reconcile, the allow-all groups.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ...watch.informers import InformerFactory
from ...watch.reconciler import Change, Enqueue, Reconciler, Watch
from ...watch.watcher import WatchTarget
from ...watch.workqueue import Waiting
from ..backend import INFRASTRUCTURE, tags
from ..pools import PortPools
from ..rules.policy import (
    POD_POLICY_FIELDS,
    AllowGroups,
    MissingGroup,
    PodInfo,
    PolicyGroup,
    allow_all_rules,
    pod_info,
    policy_group,
    policy_groups,
    policy_key,
)
from ..rules.translate import POD_PORT_FIELDS, pod_port, translated_namespace
from .context import TranslationContext, TranslationReconciler
from .namespaces import NAMESPACES
from .pods import PODS

log = logging.getLogger(__name__)

POLICIES = WatchTarget("networking.k8s.io/v1", "NetworkPolicy")
NAME = "network-policies"  # the reconciler's, and its queue's
POLICY_KIND = "NetworkPolicy"
POLICY = "policy"  # the kind of keys
Key = tuple[str, str]  # (POLICY, namespace/name)
LABELS = "metadata.labels"


@dataclass(frozen=True)
class Made:
    """A policy's security group as made: for the policy of ``uid``, with the rules of ``digest``."""

    uid: str
    group: str
    digest: str


class NetworkPolicies(TranslationReconciler):
    def __init__(self, context: TranslationContext, informers: InformerFactory, pools: PortPools | None = None) -> None:
        """``pools``: the port pools, whose free ports may carry a group that goes."""
        super().__init__(context)
        self.pools = pools
        self.policies = informers.lister(POLICIES, ("spec",))
        self.namespaces = informers.lister(NAMESPACES, (LABELS,))
        self.pods = informers.lister(PODS, (*POD_PORT_FIELDS, *POD_POLICY_FIELDS))
        self.made: dict[str, Made] = {}  # namespace/name → its group
        self.retiring: list[tuple[str, Made]] = []  # groups of policies gone, until their ports left them
        self.selected: dict[str, frozenset[str]] = {}  # namespace/name → the pods selected at its last sync
        self.allow: AllowGroups | None = None
        self._allowing = asyncio.Lock()
        self.enqueue = Enqueue()  # its own queue's handle: resync() queues the policies gone while stopped

    def reconciler(self, concurrency: int) -> Reconciler:
        return Reconciler(
            NAME,
            self.reconcile,
            [
                Watch(POLICIES, keys=self._policy_keys, needs_list=True),
                Watch(NAMESPACES, keys=self._namespace_keys),
                Watch(PODS, keys=self._pod_keys),
            ],
            concurrency,
            enqueue=self.enqueue,
        )

    async def load(self) -> None:
        """The policies' groups made before a restart."""
        for row in await self._blocking(self.store.rows_of, POLICY_KIND):
            self.made[policy_key(row.namespace or "", row.name)] = Made(
                row.uid, row.state["security_group"], row.state.get("digest", "")
            )

    def resync(self) -> None:
        """Policies deleted while kuberaven was stopped (the start's list did not have them): their groups go."""
        for key in set(self.made) - {self._key_of(p) for p in self._translated()}:
            self.enqueue((POLICY, key))

    async def _allow(self) -> AllowGroups:
        """The allow-all groups, made when first needed (a cluster without policies has none), once."""
        async with self._allowing:
            if self.allow is None:
                self.allow = await self._blocking(self._allow_groups)
        return self.allow

    def _allow_groups(self) -> AllowGroups:
        made = {}
        for direction, rules in allow_all_rules().items():
            group = self.backend.ensure_security_group(
                f"kuberaven-{self.cluster}-allow-{direction}", tags(self.cluster, INFRASTRUCTURE)
            )
            self.backend.set_security_group_rules(group, rules)
            made[direction] = group
        return AllowGroups(**made)

    # -- which keys an event concerns ---------------------------------------------

    @staticmethod
    def _key_of(policy: dict[str, Any]) -> str:
        meta = policy["metadata"]
        return policy_key(meta["namespace"], meta["name"])

    def _translated(self) -> list[dict[str, Any]]:
        """The policies whose namespace is translated (the others' pods have no ports to carry a group)."""
        return [p for p in self.policies.all() if translated_namespace(p["metadata"]["namespace"], self.options)]

    def _all_policies(self) -> list[Key]:
        return [(POLICY, self._key_of(p)) for p in self._translated()]

    def _policy_keys(self, change: Change) -> list[Key]:
        if not translated_namespace(change.object["metadata"]["namespace"], self.options):
            return []  # its pods have no ports to carry a group
        return [(POLICY, change.key)]

    def _namespace_keys(self, change: Change) -> list[Key]:
        if not self.policies:
            return []  # no policy reads labels (one made later reconciles with the newest)
        labels = None if change.type == "DELETED" else self.namespaces.get(change.key)
        before = (change.previous or {}).get("metadata", {}).get("labels")
        after = (labels or {}).get("metadata", {}).get("labels")
        if change.previous is not None and labels is not None and before == after:
            return []
        return self._all_policies()

    def _view(self, pod: dict[str, Any] | None) -> PodInfo | None:
        """What policies read of a pod; None when it has no port due (its port goes, or never comes)."""
        spec = pod_port(pod, self.options) if pod is not None else None
        return pod_info(pod, spec.address) if pod is not None and spec is not None else None

    def _pod_keys(self, change: Change) -> list[Key]:
        if not self.policies:
            return []  # pods are checked when a policy comes (every pod of its namespace, once)
        now = None if change.type == "DELETED" else self._view(self.pods.get(change.key))
        before = self._view(change.previous)
        if change.previous is not None and _same(before, now):
            return []
        return self._all_policies()  # the pod's own groups: the pods reconciler reconciles it on this event too

    async def policy_groups(self, key: str) -> tuple[str, ...] | None:
        """The groups of the policies selecting the pod ``key`` (pods.py's input), with the allow-all group of
        each direction none of them restricts; () when none selects it (or it has no port due); None while not
        every policy is known (one missed would leave the pod open) or a selecting policy's group is not made."""
        if not self.policies.complete:
            return None
        if not self.policies:
            return ()
        pod = self.pods.get(key)  # pods.py read it into the shared store (fetch) before asking
        if pod is None:
            return None
        info = self._view(pod)
        policies = self._policies_in(info.namespace) if info is not None else []
        if info is None or not policies:
            return ()
        allow = await self._allow()
        made = {name: m.group for name, m in self.made.items()}
        try:
            return tuple(policy_groups(info, policies, made, allow))
        except MissingGroup:
            return None

    def _policies_in(self, namespace: str) -> list[dict[str, Any]]:
        return [p for p in self.policies.all() if p["metadata"]["namespace"] == namespace]

    # -- reconcile ---------------------------------------------------------------------

    async def reconcile(self, key: Key) -> None:
        await self._complete()
        _, name = key
        policy = self.policies.get(name)
        if policy is not None and not translated_namespace(policy["metadata"]["namespace"], self.options):
            policy = None
        made = self.made.get(name)
        if made is not None and (policy is None or made.uid != policy["metadata"]["uid"]):
            self.retiring.append((name, made))
            del self.made[name]
            self.selected.pop(name, None)
        if policy is not None:
            await self._sync_policy(name, policy)
        for item in [r for r in self.retiring if r[0] == name]:
            await self._retire(name, item[1])
            self.retiring.remove(item)

    async def _complete(self) -> None:
        """Every pod and namespace in the stores (once: resumed informers give only what changed since)."""
        await self.policies.ensure_complete()
        await self.namespaces.ensure_complete()
        await self.pods.ensure_complete()

    def _infos(self) -> list[PodInfo]:
        return [info for info in map(self._view, self.pods.all()) if info is not None]

    async def _sync_policy(self, key: str, policy: dict[str, Any]) -> None:
        await self._allow()  # ready for the ports of the pods it will select (policy_groups)
        infos = self._infos()
        labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in self.namespaces.all()}
        spec = policy_group(policy, infos, labels, self.options.service_cidr)
        made = self.made.get(key)
        if made is None or made.digest != spec.digest():
            meta = policy["metadata"]
            made = await self._blocking(self._write_group, meta, spec, made)
            self.made[key] = made
        before = self.selected.get(key)
        namespace = policy["metadata"]["namespace"]
        keys = {info.uid: f"{info.namespace}/{info.name}" for info in infos if info.namespace == namespace}
        # Not synced since the start: every pod of its namespace is checked once.
        changed = (before ^ spec.selected) if before is not None else set(keys)
        self.selected[key] = spec.selected
        for uid in changed:
            if uid in keys:  # else gone, or no longer with a port: pods.py deletes its port
                self.pod_queue(keys[uid])

    def _write_group(self, meta: dict[str, Any], spec: PolicyGroup, made: Made | None) -> Made:
        group = made.group if made else self.backend.ensure_security_group(spec.name, tags(self.cluster, meta["uid"]))
        self.backend.set_security_group_rules(group, list(spec.rules))
        digest = spec.digest()
        state = {
            "security_group": group,
            "digest": digest,
            "policy": spec.policy,
            "directions": list(spec.directions),
            "rules": len(spec.rules),
        }
        self.store.save(POLICY_KIND, meta["uid"], meta["namespace"], meta["name"], state)
        return Made(meta["uid"], group, digest)

    async def _retire(self, key: str, made: Made) -> None:
        """A gone policy's group: its pods are queued, and the group goes once no port of a pod that is still due
        one carries it (Neutron refuses to delete a group in use; a going pod's port goes with it)."""
        namespace = key.partition("/")[0]
        holding = [
            row
            for row in await self._blocking(self.store.rows_in, "Pod", namespace)
            if made.group in (row.state.get("security_groups") or [])
        ]
        for row in holding:
            self.pod_queue(f"{namespace}/{row.name}")
        due = [row.name for row in holding if self._due(namespace, row.name, row.uid)]
        if due:
            raise Waiting(f"ports of {len(due)} pods (as {due[0]}) still carry the group of policy {key}")
        if self.pools is not None:  # free ports given back by pods the policy selected
            await self._blocking(self.pools.drop_group, made.group)
        await self._blocking(self.store.forget, POLICY_KIND, made.uid, ("security_group",))
        log.info("security group %s of policy %s removed", made.group, key)

    def _due(self, namespace: str, name: str, uid: str) -> bool:
        """Whether the pod of ``uid`` is there and has a port due (the pods reconciler gives it its groups)."""
        info = self._view(self.pods.get(f"{namespace}/{name}"))
        return info is not None and info.uid == uid


def _same(before: PodInfo | None, now: PodInfo | None) -> bool:
    """Whether policies read the same of a pod (its resourceVersion aside)."""
    if before is None or now is None:
        return before is now
    return (before.labels, before.ip, before.named_ports) == (now.labels, now.ip, now.named_ports)
