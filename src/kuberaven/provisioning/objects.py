"""The steps of objects made from one row each (provisioning/): Namespace, ServiceAccount, ConfigMap, Secret, Service.

    TrustDomain ──► Namespace          KubernetesConfigMap ──► ConfigMap
    Principal   ──► ServiceAccount     KubernetesSecret    ──► Secret
    Service (+ its ServicePorts) ──► Service, selecting its slices' pods

Each is steps.py's Step with manifests.py's manifest for its kind; a
Service also waits for a port and is dirty when one of its ports is.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, selectinload

from ..kube.resources import Resource
from ..model.base import table_of
from ..model.cluster import Principal, Service, ServicePort, TrustDomain
from ..model.workloads import KubernetesConfigMap, KubernetesSecret
from . import manifests
from .steps import Step, Work, dirty, waiting_for


class NamespaceStep(Step):
    model = TrustDomain
    resource = Resource("", "v1", "Namespace", "namespaces", namespaced=False)

    def in_cluster(self, cluster_id: int) -> list[sa.ColumnElement[bool]]:
        return [TrustDomain.owner_id == cluster_id]

    def load_options(self) -> list[Any]:
        return []

    def waiting(self, row: Any) -> str | None:
        return None

    def manifest(self, row: Any) -> dict[str, Any]:
        return manifests.namespace(row)


class ServiceAccountStep(Step):
    model = Principal
    resource = Resource("", "v1", "ServiceAccount", "serviceaccounts", namespaced=True)

    def manifest(self, row: Any) -> dict[str, Any]:
        return manifests.service_account(row)


class ConfigMapStep(Step):
    model = KubernetesConfigMap
    resource = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)

    def manifest(self, row: Any) -> dict[str, Any]:
        return manifests.config_map(row)


class SecretStep(Step):
    model = KubernetesSecret
    resource = Resource("", "v1", "Secret", "secrets", namespaced=True)

    def manifest(self, row: Any) -> dict[str, Any]:
        return manifests.secret(row)


class ServiceStep(Step):
    model = Service
    resource = Resource("", "v1", "Service", "services", namespaced=True)

    def in_cluster(self, cluster_id: int) -> list[sa.ColumnElement[bool]]:
        return [Service.leaf_model_name == "Service", *super().in_cluster(cluster_id)]

    def is_dirty(self) -> sa.ColumnElement[bool]:
        ports = sa.select(ServicePort.id).where(ServicePort.service_id == Service.id, dirty(ServicePort)).exists()
        return sa.or_(dirty(Service), ports)

    def load_options(self) -> list[Any]:
        return [selectinload(Service.trust_domain), selectinload(Service.ports)]

    def work(self, session: Session, row: Any) -> Work:
        item = Work.of(row)
        ports = sorted(row.ports, key=lambda p: p.id)
        item.parts = [(table_of(ServicePort), p.id, p.updated) for p in ports]
        item.waiting = waiting_for(row.trust_domain) or (None if ports else "waiting for a ServicePort")
        if item.waiting is None:
            item.manifest = manifests.service(row, ports)
        return item
