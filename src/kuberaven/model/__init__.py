"""The SQL data model (model/): tables, migrations and the Python API.

from kuberaven.model import *
connect()          # KUBERAVEN_DB, else the per-user database; or connect("postgresql://..."); optional
t = TrustDomain(name="demo-trust", owner=KubernetesService.objects.first()); t.save()
"""

from . import asof, history, tombstones  # noqa: F401  (history: its tables, Model.objects.at(); deletes for the sync loop)
from .base import Model, QuerySet, utcnow
from .cluster import Image, KubernetesService, Principal, Service, ServicePort, Site, Slice, TrustDomain
from .database import Database, connect, current
from .errors import (
    DatabaseUnavailable,
    DeleteRefused,
    DoesNotExist,
    ModelError,
    MultipleObjectsReturned,
    ValidationError,
)
from .images import ImageReference, parse_image
from .journal import OutboxEvent, SyncTombstone, WatchPosition
from .network import NetworkAddress, NetworkResource, NetworkTranslation
from .workloads import (
    KubectlState,
    KubernetesConfigMap,
    KubernetesConfigVolumeMount,
    KubernetesResourceInstance,
    KubernetesSecret,
    KubernetesSecretVolumeMount,
    KubernetesServiceInstance,
    ServiceInstance,
)

# The original documents' name of KubernetesConfigVolumeMount (the same model).
KubernetesConfigMapVolumeMount = KubernetesConfigVolumeMount

__all__ = [
    "Database",
    "DatabaseUnavailable",
    "DeleteRefused",
    "DoesNotExist",
    "Image",
    "ImageReference",
    "KubectlState",
    "KubernetesConfigMap",
    "KubernetesConfigMapVolumeMount",
    "KubernetesConfigVolumeMount",
    "KubernetesResourceInstance",
    "KubernetesSecret",
    "KubernetesSecretVolumeMount",
    "KubernetesService",
    "KubernetesServiceInstance",
    "Model",
    "ModelError",
    "MultipleObjectsReturned",
    "NetworkAddress",
    "NetworkResource",
    "NetworkTranslation",
    "OutboxEvent",
    "Principal",
    "QuerySet",
    "Service",
    "ServiceInstance",
    "ServicePort",
    "Site",
    "Slice",
    "SyncTombstone",
    "TrustDomain",
    "ValidationError",
    "WatchPosition",
    "connect",
    "current",
    "parse_image",
    "utcnow",
]
