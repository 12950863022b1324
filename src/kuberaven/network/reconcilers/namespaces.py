"""Namespaces (network/, a reconciler): a Namespace ──► network + subnet + security group, and its summary.

    Namespace events ──► its name ──► reconcile(name): the Namespace from the namespaces lister (watch/store.py)
        gone, or recreated under its name ──► its port pools dropped (pools.py), what was made for the old uid
            deleted (state.py): the network takes its ports with it
        translated (translate.py: not a skipped system namespace) ──► network, subnet, security group (once),
            the ingress rules, router interface and source filters (idempotent) ──► NetworkTranslation row
            (once connected: pods wait for it, so none is wired where it cannot yet be reached)
            ──► the kuberaven.io/network annotation on the Namespace (annotations.py)

Pods and Services of a namespace wait (retried with backoff) until its
network exists; nothing here queues them.
"""

from __future__ import annotations

from typing import Any

from ...watch.reconciler import Reconciler, Watch
from ...watch.store import Lister
from ...watch.watcher import WatchTarget
from ..annotations import ANNOTATION, annotate, summary
from ..backend import tags
from ..drivers.security_groups import ANY_IPV4
from ..pools import PortPools
from ..rules.translate import translated_namespace
from .context import TranslationContext, TranslationReconciler

NAMESPACES = WatchTarget("v1", "Namespace")
KIND = "Namespace"
MADE = ("network", "security_group")  # what the state keeps the ids of, deleted with the namespace
SUMMARY_FIELDS = ("network", "subnet", "cidr")


class NamespaceNetworks(TranslationReconciler):
    def __init__(self, context: TranslationContext, namespaces: Lister, pools: PortPools | None = None) -> None:
        """``pools``: the port pools, whose ports of a gone namespace go with its network."""
        super().__init__(context)
        self.namespaces = namespaces
        self.pools = pools

    def reconciler(self) -> Reconciler:
        return Reconciler("network-namespaces", self.reconcile, [Watch(NAMESPACES)])

    async def reconcile(self, name: str) -> None:
        # Only the namespaces informer's events queue a name, after the store took them: absent means deleted.
        namespace = self.namespaces.get(name)
        uid = namespace["metadata"]["uid"] if namespace else None
        for row in await self._blocking(self.store.rows_named, KIND, None, name):
            if row.uid != uid:
                if self.pools is not None:
                    await self._blocking(self.pools.forget_namespace, name, row.state["network"])
                await self._blocking(self.store.forget, KIND, row.uid, MADE)
        if namespace is None or uid is None or not translated_namespace(name, self.options):
            return
        state = await self._blocking(self.store.state, KIND, uid)
        if state is None:
            # Recorded once connected: pods (and port pools) take the namespace's network only when its pods
            # can be reached. What a crash before the record leaves is found again (ensure_* are idempotent).
            state = await self._blocking(self._translate, name, uid)
            await self._blocking(self._connect, state)
            await self._blocking(self.store.save, KIND, uid, None, name, state)
        else:
            await self._blocking(self._connect, state)
        value = summary(self.backend.name, {k: state.get(k) for k in SUMMARY_FIELDS})
        await annotate(self.client, KIND, namespace, ANNOTATION, value)

    def _connect(self, state: dict[str, Any]) -> None:
        """What lets a namespace's pods be reached and reach out; idempotent, so namespaces translated
        by an older kuberaven get it too."""
        # Load balancers reach their members from the Services' subnet (Octavia's amphorae, the VIPs),
        # and pods no NetworkPolicy selects (they keep this group) are open to all, as Kubernetes has it.
        self.backend.ensure_ingress_rule(state["security_group"], self.options.service_cidr)
        self.backend.ensure_ingress_rule(state["security_group"], ANY_IPV4)
        if self.options.subnet_mode == "namespace":
            # The namespace's own subnet joins the cluster router: its pods reach the Services' subnet
            # and the outside. (In cluster mode every namespace has the same CIDR: one router cannot
            # hold them all.)
            self.backend.ensure_router_interface(self.infrastructure.router, state["subnet"])
        # Its pods are held to the source ranges of the LoadBalancer Services made before it (lb_ranges.py).
        self.backend.copy_source_filters(self.cluster, state["network"])

    def _translate(self, name: str, uid: str) -> dict[str, Any]:
        resource_tags = tags(self.cluster, uid)
        network = self.backend.ensure_network(name, resource_tags)
        if self.options.subnet_mode == "namespace":
            subnet = self.backend.ensure_subnet(
                network, name, resource_tags, pool=self.infrastructure.subnet_pool, prefix=self.options.namespace_prefix
            )
        else:
            subnet = self.backend.ensure_subnet(network, name, resource_tags, cidr=self.options.pod_cidr)
        group = self.backend.ensure_security_group(f"namespace-{name}", resource_tags)
        return {
            "network": network,
            "subnet": subnet.id,
            "cidr": subnet.cidr,
            "gateway": subnet.gateway,
            "security_group": group,
        }
