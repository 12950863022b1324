"""NetworkPolicies (network/): policies, pods' and namespaces' labels ──► security groups on pods' ports.

    translator.py's informers ──► NetworkPolicies
        NetworkPolicy (listed at every start: policies are few)  ──► the latest of each, by name
        Namespace labels (the namespaces informer, listed too)   ──► the latest labels, by name
        Pod labels, IP, named ports (the pods informer)          ──► PodIndex; filled once by a LIST of pods when a
                                                                     policy exists (a resumed informer lists nothing)
    ──► a keyed queue:
        policy/<ns>/<name>: policy_group() (policy.py) ──► its security group and rules (same digest: no call)
                            ──► NetworkPolicy row (state.py) ──► ports of the pods selected before or now queued;
                            a policy gone (or made again under its name): its ports leave its group, which goes
        port/<uid>: port_groups() ──► set_port_security_groups ──► the Pod row's security_groups

A new pod's port is made by pods.py with the groups creation_groups() gives
(those of the policies selecting the pod; none: its namespace's); the pod's
event then queues its port here, which keeps it with the groups of the
policies that select it as labels and policies change (a pod selected by
none keeps its namespace's group).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..kube.client import KubeClient
from ..kube.reflector import WatchEvent
from ..raven.queue import KeyedQueue, Waiting
from .backend import INFRASTRUCTURE, NetworkBackend, NetworkOptions, tags
from .policy import (
    AllowGroups,
    MissingGroup,
    PodInfo,
    PolicyGroup,
    allow_all_rules,
    pod_info,
    policy_group,
    policy_groups,
    policy_key,
    port_groups,
)
from .state import TranslationStore
from .translate import pod_port, translated_namespace

log = logging.getLogger(__name__)

Blocking = Callable[..., Awaitable[Any]]
POLICY_KIND = "NetworkPolicy"
POLICY, PORT = "policy", "port"  # the queue's key prefixes
SEED_PAGE = 500  # pods per page of the seeding LIST


@dataclass(frozen=True)
class Made:
    """A policy's security group as made: for the policy of ``uid``, with the rules of ``digest``."""

    uid: str
    group: str
    digest: str


class PodIndex:
    """What policies read of every pod that has (or will have) a port, by uid."""

    def __init__(self) -> None:
        self.pods: dict[str, PodInfo] = {}
        self.gone: set[str] | None = None  # uids deleted while a seeding LIST runs: its copy is older

    def put(self, info: PodInfo) -> bool:
        """Keep ``info`` unless a newer one is known; whether what policies read changed."""
        old = self.pods.get(info.uid)
        if (old is not None and old.version > info.version) or (self.gone is not None and info.uid in self.gone):
            return False
        self.pods[info.uid] = info
        return old is None or (old.labels, old.ip, old.named_ports) != (info.labels, info.ip, info.named_ports)

    def remove(self, uid: str) -> bool:
        if self.gone is not None:
            self.gone.add(uid)
        return self.pods.pop(uid, None) is not None


class NetworkPolicies:
    def __init__(
        self, client: KubeClient, store: TranslationStore, backend: NetworkBackend, options: NetworkOptions,
        cluster: str, blocking: Blocking, *, concurrency: int, retry_initial: float, retry_max: float,
    ) -> None:  # fmt: skip
        self.client = client
        self.store = store
        self.backend = backend
        self.options = options
        self.cluster = cluster
        self._blocking = blocking
        self.policies: dict[str, dict[str, Any]] = {}  # namespace/name → the policy
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.index = PodIndex()
        self.made: dict[str, Made] = {}  # namespace/name → its group
        self.retiring: list[tuple[str, Made]] = []  # groups of policies gone, until their ports left them
        self.selected: dict[str, frozenset[str]] = {}  # namespace/name → the pods selected at its last sync
        self.namespace_groups: dict[str, str] = {}  # namespace → its default group
        self.allow: AllowGroups | None = None
        self.seeded = False
        self._seeding = asyncio.Lock()
        self._allowing = asyncio.Lock()
        self.queue = KeyedQueue(
            "network-policies", self._sync, lambda _seqs: None, concurrency=concurrency,
            retry_initial=retry_initial, retry_max=retry_max,
        )  # fmt: skip

    async def load(self) -> None:
        """The policies' groups made before a restart."""
        for row in await self._blocking(self.store.rows_of, POLICY_KIND):
            self.made[policy_key(row.namespace or "", row.name)] = Made(row.uid, row.state["security_group"],
                                                                        row.state.get("digest", ""))  # fmt: skip

    async def _allow(self) -> AllowGroups:
        """The allow-all groups, made when first needed (a cluster without policies has none), once."""
        async with self._allowing:
            if self.allow is None:
                self.allow = await self._blocking(self._allow_groups)
        return self.allow

    def _allow_groups(self) -> AllowGroups:
        made = {}
        for direction, rules in allow_all_rules().items():
            group = self.backend.ensure_security_group(f"kuberaven-{self.cluster}-allow-{direction}",
                                                       tags(self.cluster, INFRASTRUCTURE))  # fmt: skip
            self.backend.set_security_group_rules(group, rules)
            made[direction] = group
        return AllowGroups(**made)

    # -- events (the translator's watchers) --------------------------------------

    async def on_policy(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        if not translated_namespace(meta["namespace"], self.options):
            return  # its pods have no ports to carry a group
        key = policy_key(meta["namespace"], meta["name"])
        if event.type == "DELETED":
            if (self.policies.get(key) or {}).get("metadata", {}).get("uid") == meta["uid"]:
                del self.policies[key]
        else:
            self.policies[key] = event.object
        self._queue(POLICY, key)

    def on_policies_synced(self) -> None:
        """Policies deleted while kuberaven was stopped: their groups go (the list did not have them)."""
        for key in set(self.made) - set(self.policies):
            self._queue(POLICY, key)

    async def on_namespace(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        labels = {} if event.type == "DELETED" else dict(meta.get("labels") or {})
        if event.type == "DELETED":
            self.namespace_labels.pop(meta["name"], None)
            self.namespace_groups.pop(meta["name"], None)
        elif self.namespace_labels.get(meta["name"]) != labels:
            self.namespace_labels[meta["name"]] = labels
        else:
            return
        self._queue_policies()

    def on_pod(self, event: WatchEvent) -> None:
        """Before pods.py: what policies read of the pod (its IP is a peer's rule)."""
        pod = event.object
        spec = None if event.type == "DELETED" else pod_port(pod, self.options)
        uid = pod["metadata"]["uid"]
        changed = self.index.remove(uid) if spec is None else self.index.put(pod_info(pod, spec.address))
        if changed:
            self._queue_policies()

    def after_port(self, event: WatchEvent) -> None:
        """After pods.py made the pod's port: its groups, if policies in its namespace may select it."""
        meta = event.object["metadata"]
        if meta["uid"] in self.index.pods and self._policies_in(meta["namespace"]):
            self._queue(PORT, meta["uid"])

    def creation_groups(self, pod: dict[str, Any]) -> tuple[str, ...]:
        """The groups a new port starts with: those of the policies selecting the pod, when all are made
        (else its namespace's, until its port's sync): a new pod is not open while its port is made."""
        meta = pod["metadata"]
        info = self.index.pods.get(meta["uid"])
        if info is None or self.allow is None:
            return ()
        made = {key: m.group for key, m in self.made.items()}
        try:
            return tuple(policy_groups(info, self._policies_in(meta["namespace"]), made, self.allow))
        except MissingGroup:
            return ()

    def _queue(self, kind: str, key: str) -> None:
        marker = {"metadata": {"namespace": kind, "name": key}}
        self.queue.add(f"{kind}/{key}", WatchEvent("MODIFIED", marker), 0)

    def _queue_policies(self) -> None:
        for key in self.policies:
            self._queue(POLICY, key)

    def _policies_in(self, namespace: str) -> list[dict[str, Any]]:
        return [p for p in self.policies.values() if p["metadata"]["namespace"] == namespace]

    # -- syncs ---------------------------------------------------------------------

    async def _sync(self, event: WatchEvent) -> None:
        await self._seed()
        kind, _, key = event.key.partition("/")
        if kind == PORT:
            await self._sync_port(key)
            return
        policy = self.policies.get(key)
        made = self.made.get(key)
        if made is not None and (policy is None or made.uid != policy["metadata"]["uid"]):
            self.retiring.append((key, made))
            del self.made[key]
            self.selected.pop(key, None)
        if policy is not None:
            await self._sync_policy(key, policy)
        for item in [r for r in self.retiring if r[0] == key]:
            await self._retire(key, item[1])
            self.retiring.remove(item)

    async def _seed(self) -> None:
        """Every pod in the index, once: a resumed pods informer gives only what changed since it stopped."""
        if self.seeded:
            return
        async with self._seeding:
            if self.seeded:
                return
            self.index.gone = set()
            try:
                async for pod in self.client.list_objects("/api/v1/pods", page_size=SEED_PAGE):
                    spec = pod_port(pod, self.options)
                    if spec is not None:
                        self.index.put(pod_info(pod, spec.address))
            finally:
                self.index.gone = None
            self.seeded = True

    async def _sync_policy(self, key: str, policy: dict[str, Any]) -> None:
        await self._allow()  # ready for the ports of the pods it will select (creation_groups)
        spec = policy_group(policy, self.index.pods.values(), self.namespace_labels, self.options.service_cidr)
        made = self.made.get(key)
        if made is None or made.digest != spec.digest():
            meta = policy["metadata"]
            made = await self._blocking(self._write_group, meta, spec, made)
            self.made[key] = made
        before = self.selected.get(key)
        namespace = policy["metadata"]["namespace"]
        # Not synced since the start: every pod of its namespace is checked once.
        changed = (before ^ spec.selected) if before is not None else {
            uid for uid, pod in self.index.pods.items() if pod.namespace == namespace
        }  # fmt: skip
        self.selected[key] = spec.selected
        for uid in changed:
            self._queue(PORT, uid)

    def _write_group(self, meta: dict[str, Any], spec: PolicyGroup, made: Made | None) -> Made:
        group = made.group if made else self.backend.ensure_security_group(spec.name, tags(self.cluster, meta["uid"]))
        self.backend.set_security_group_rules(group, list(spec.rules))
        digest = spec.digest()
        state = {"security_group": group, "digest": digest, "policy": spec.policy,
                 "directions": list(spec.directions), "rules": len(spec.rules)}  # fmt: skip
        self.store.save(POLICY_KIND, meta["uid"], meta["namespace"], meta["name"], state)
        return Made(meta["uid"], group, digest)

    async def _retire(self, key: str, made: Made) -> None:
        """A gone policy's group: its ports leave it first (Neutron refuses to delete a group in use)."""
        namespace = key.partition("/")[0]
        for uid, state in (await self._blocking(self.store.states_in, "Pod", namespace)).items():
            if made.group in (state.get("security_groups") or []):
                await self._sync_port(uid, state)
        await self._blocking(self.store.forget, POLICY_KIND, made.uid, ("security_group",))
        log.info("security group %s of policy %s removed", made.group, key)

    async def _sync_port(self, uid: str, state: dict[str, Any] | None = None) -> None:
        state = state or await self._blocking(self.store.state, "Pod", uid)
        if not state or not state.get("port"):
            return  # no port (yet): pods.py makes it, and the pod's event queues it again
        desired = await self._desired_groups(uid, state)
        if desired != state.get("security_groups"):
            await self._blocking(self._set_groups, uid, state["port"], desired)

    async def _desired_groups(self, uid: str, state: dict[str, Any]) -> list[str]:
        pod = self.index.pods.get(uid)
        row = None if pod else await self._blocking(self.store.row, "Pod", uid)
        namespace = pod.namespace if pod else row.namespace if row else None
        if namespace is None:  # forgotten meanwhile: nothing to change
            return list(state.get("security_groups") or [])
        if namespace not in self.namespace_groups:
            namespace_state = await self._blocking(self.store.namespace_state, namespace)
            if namespace_state is None:
                raise Waiting(f"namespace {namespace} has no security group yet")
            self.namespace_groups[namespace] = namespace_state["security_group"]
        if pod is None:  # gone, or no longer due: its port goes too
            return [self.namespace_groups[namespace]]
        allow = await self._allow()
        made = {key: m.group for key, m in self.made.items()}
        try:
            return port_groups(pod, self._policies_in(namespace), made, self.namespace_groups[namespace], allow)
        except MissingGroup as missing:
            raise Waiting(str(missing)) from None

    def _set_groups(self, uid: str, port: str, groups: list[str]) -> None:
        self.backend.set_port_security_groups(port, groups)
        self.store.update_state("Pod", uid, {"port": port}, {"security_groups": groups})
