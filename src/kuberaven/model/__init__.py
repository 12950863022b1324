"""The SQL data model (model/): tables, migrations and the Python API.

from kuberaven.model import *
connect()          # KUBERAVEN_DB, else the per-user database; or connect("postgresql://..."); optional
t = TrustDomain(name="demo-trust", owner=KubernetesService.objects.first()); t.save()

The names below are imported when first used (PEP 562): importing a module of
this package, ``registry`` for one, loads no table and no SQLAlchemy, so that
``kuberaven --help`` and the commands that use no database stay quick. Deletes
record their tombstones (tombstones.py) in every process that opens a
:class:`Database` (database.py imports them).
"""

from __future__ import annotations

import importlib

# typing is not imported: `import kuberaven` is kuberaven-cni's start, and typing alone costs it ~10 ms.
TYPE_CHECKING = False  # mypy reads the block below as if True

if TYPE_CHECKING:
    from typing import Any

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

# Each public name → the module of this package that defines it.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("Model", "QuerySet", "utcnow"), "base"),
    **dict.fromkeys(
        ("Image", "KubernetesService", "Principal", "Service", "ServicePort", "Site", "Slice", "TrustDomain"),
        "cluster",
    ),
    **dict.fromkeys(("Database", "connect", "current"), "database"),
    **dict.fromkeys(
        (
            "DatabaseUnavailable",
            "DeleteRefused",
            "DoesNotExist",
            "ModelError",
            "MultipleObjectsReturned",
            "ValidationError",
        ),
        "errors",
    ),
    **dict.fromkeys(("ImageReference", "parse_image"), "images"),
    **dict.fromkeys(("OutboxEvent", "SyncTombstone", "WatchPosition"), "journal"),
    **dict.fromkeys(("NetworkAddress", "NetworkResource", "NetworkTranslation"), "network"),
    **dict.fromkeys(
        (
            "KubectlState",
            "KubernetesConfigMap",
            "KubernetesConfigVolumeMount",
            "KubernetesResourceInstance",
            "KubernetesSecret",
            "KubernetesSecretVolumeMount",
            "KubernetesServiceInstance",
            "ServiceInstance",
        ),
        "workloads",
    ),
}
_ALIASES = {"KubernetesConfigMapVolumeMount": "KubernetesConfigVolumeMount"}

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


def __getattr__(name: str) -> Any:
    """A public name, its module imported on first use (then cached in the package's namespace)."""
    target = _ALIASES.get(name, name)
    home = _HOMES.get(target)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), target)
    globals()[name] = value
    return value
