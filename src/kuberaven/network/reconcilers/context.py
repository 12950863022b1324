"""What the network translation's reconcilers share (network/reconcilers/), made once by the translator.

NetworkTranslator ──► TranslationContext(client, store, backend, options, cluster, blocking, infrastructure,
                                         pod_queue, events)
    ──► NamespaceNetworks, PodsReconciler, LoadBalancers, NetworkPolicies (each a TranslationReconciler)

The client, store, threads (``blocking``), pods' queue and Event recorder are the cluster's translation
runtime's (translation_runtime.py): one of each per cluster. The shared infrastructure is the translator's and
answers once it runs (it is made before the engine starts, so before any reconcile). The pods' queue is a typed
handle (watch/reconciler.py's Enqueue): what another reconciler finds of a pod reaches the pods reconciler's
queue through it, from the loop or a worker thread, the engine's controller reading it once it runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ...kube.client import KubeClient
from ...kube.event_recorder import EventRecorder
from ...watch.reconciler import Enqueue
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
    pod_queue: Enqueue  # a pod's namespace/name into the pods reconciler's queue
    events: EventRecorder  # the Events recorded for pods and Services


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
        self.pod_queue = context.pod_queue
        self.events = context.events

    @property
    def infrastructure(self) -> Infrastructure:
        """The cluster's shared infrastructure (the translator makes it before any reconcile runs)."""
        return self._infrastructure()
