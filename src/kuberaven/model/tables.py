"""The model's kinds by name (model/): which tables users address, in what order, by which names.

    cluster.py, workloads.py, journal.py (the tables) ──► USER_MODELS, KIND_ALIASES ──► documents.py
                                                                                       (apply/get/delete)
                                                       ──► MODELS_BY_NAME ──► provisioning/ (a tombstone's model)

The tables themselves are defined by job in cluster.py (what a cluster is
made of), workloads.py (what runs in it) and journal.py (kuberaven's own
records); network.py holds the network translation's.
"""

from __future__ import annotations

from .base import Model
from .cluster import Image, KubernetesService, Principal, Service, ServicePort, Site, Slice, TrustDomain
from .journal import OutboxEvent, SyncTombstone, WatchPosition
from .names import DNS_LABEL, DNS_SUBDOMAIN
from .workloads import (
    KubernetesConfigMap,
    KubernetesConfigVolumeMount,
    KubernetesResourceInstance,
    KubernetesSecret,
    KubernetesSecretVolumeMount,
    KubernetesServiceInstance,
    ServiceInstance,
)

# DNS_LABEL and DNS_SUBDOMAIN are re-exported: plugins validate their names with them.
__all__ = ["DNS_LABEL", "DNS_SUBDOMAIN", "KIND_ALIASES", "MODELS_BY_NAME", "USER_MODELS"]

# Models users address by name in get/apply/delete, in dependency order.
USER_MODELS: tuple[type[Model], ...] = (
    Site,
    KubernetesService,
    Service,
    ServicePort,
    TrustDomain,
    Principal,
    Slice,
    Image,
    KubernetesConfigMap,
    KubernetesSecret,
    ServiceInstance,
    KubernetesServiceInstance,
    KubernetesResourceInstance,
    KubernetesConfigVolumeMount,
    KubernetesSecretVolumeMount,
)
# The original's other names of a kind: its documents list "KubernetesConfigMapVolumeMount".
KIND_ALIASES: dict[str, type[Model]] = {"KubernetesConfigMapVolumeMount": KubernetesConfigVolumeMount}
_BOOKKEEPING: tuple[type[Model], ...] = (WatchPosition, OutboxEvent, SyncTombstone)
MODELS_BY_NAME: dict[str, type[Model]] = {m.__name__: m for m in (*USER_MODELS, *_BOOKKEEPING)}
