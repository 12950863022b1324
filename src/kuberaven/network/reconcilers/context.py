"""What the network translation's reconcilers share (network/reconcilers/), made once by the translator.

NetworkTranslator ──► TranslationContext(client, store, backend, options, cluster, blocking, infrastructure,
                                         enqueue)
    ──► NamespaceNetworks, PodPorts, LoadBalancers, NetworkPolicies (each a TranslationReconciler)

Two of its parts are the translator's and answer once it runs: the cluster's shared infrastructure (made before
the engine starts, so before any reconcile) and the engine's queues (made after the reconcilers).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from ...kube.client import KubeClient
from ..backend import NetworkOptions
from ..drivers import NetworkBackend
from ..drivers.networks import Infrastructure
from ..state import TranslationStore

Blocking = Callable[..., Awaitable[Any]]  # runs a blocking backend call in the translation's threads


@dataclass(frozen=True)
class TranslationContext:
    client: KubeClient
    store: TranslationStore  # the translation rows: what was made for which object
    backend: NetworkBackend
    options: NetworkOptions
    cluster: str
    blocking: Blocking
    infrastructure: Callable[[], Infrastructure]  # the cluster's router, subnet pool, Service subnet, …
    enqueue: Callable[[str, Hashable], None]  # (reconciler's name, key): a key into that reconciler's queue


class TranslationReconciler:
    """A reconciler of the translation: the context's parts under the names its methods use."""

    def __init__(self, context: TranslationContext) -> None:
        self.client = context.client
        self.store = context.store
        self.backend = context.backend
        self.options = context.options
        self.cluster = context.cluster
        self._blocking = context.blocking
        self._infrastructure = context.infrastructure
        self._enqueue = context.enqueue

    @property
    def infrastructure(self) -> Infrastructure:
        """The cluster's shared infrastructure (the translator makes it before any reconcile runs)."""
        return self._infrastructure()
