"""What the network translation's reconcilers share (network/reconcilers/), made once by the translator.

NetworkTranslator ──► TranslationContext(client, store, backend, options, cluster, blocking)
    ──► NamespaceNetworks, PodPorts, LoadBalancers, NetworkPolicies (each a TranslationReconciler)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ...kube.client import KubeClient
from ..backend import NetworkBackend, NetworkOptions
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


class TranslationReconciler:
    """A reconciler of the translation: the context's parts under the names its methods use."""

    def __init__(self, context: TranslationContext) -> None:
        self.client = context.client
        self.store = context.store
        self.backend = context.backend
        self.options = context.options
        self.cluster = context.cluster
        self._blocking = context.blocking
