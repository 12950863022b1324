"""What each model row becomes in Kubernetes (provisioning/): pure functions, row → manifest.

    TrustDomain ─► Namespace          Principal ─► ServiceAccount
    KubernetesConfigMap ─► ConfigMap  KubernetesSecret ─► Secret (values base64-encoded here)
    KubernetesServiceInstance + mounts ─► Pod
    Service + ServicePorts ─► Service (NodePort, or ClusterIP with no external port)

Every object carries ``app.kubernetes.io/managed-by: kuberaven`` and the
annotation ``kuberaven.io/row: <Model>/<id>``; that pair is how kuberaven
knows an object is its own. Manifests are complete: server-side apply under
the field manager "kuberaven" then removes whatever an earlier apply set and
this one omits (a ConfigMap key deleted in the model, a dropped port).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence
from typing import Any

from ..kube.client import FIELD_MANAGER
from ..model.base import Model
from ..model.cluster import Principal, Service, ServicePort, TrustDomain
from ..model.workloads import (
    KubernetesConfigMap,
    KubernetesConfigVolumeMount,
    KubernetesSecret,
    KubernetesSecretVolumeMount,
    KubernetesServiceInstance,
)

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = FIELD_MANAGER  # the managed-by value is the name kuberaven applies under
ROW_ANNOTATION = "kuberaven.io/row"
SLICE_LABEL = "kuberaven.io/slice"
INSTANCE_LABEL = "kuberaven.io/instance"
# The label the original's consumers match services by; also the Service's selector.
SERVICE_LABEL = "xos_service"

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NOT_LABEL_CHARS = re.compile(r"[^-A-Za-z0-9_.]")
_NOT_DNS_CHARS = re.compile(r"[^a-z0-9-]")


def row_reference(row: Model) -> str:
    return f"{type(row).__name__}/{row.id}"


def is_ours(obj: dict[str, Any], reference: str | None = None) -> bool:
    """Whether kuberaven made ``obj`` (for the row ``reference``, when given)."""
    meta = obj.get("metadata", {})
    if (meta.get("labels") or {}).get(MANAGED_BY) != MANAGER:
        return False
    return reference is None or (meta.get("annotations") or {}).get(ROW_ANNOTATION) == reference


def label_value(text: str) -> str:
    """``text`` as a valid label value; changed ones get a hash suffix so distinct texts stay distinct."""
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    cleaned = _NOT_LABEL_CHARS.sub("-", text)[:54].strip("-_.")
    return f"{cleaned}-{digest}" if cleaned else digest


def _metadata(row: Model, name: str, namespace: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {MANAGED_BY: MANAGER, **(labels or {})},
        "annotations": {ROW_ANNOTATION: row_reference(row)},
    }
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def namespace(row: TrustDomain) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _metadata(row, row.name, None)}


def service_account(row: Principal) -> dict[str, Any]:
    meta = _metadata(row, row.name, row.trust_domain.name)
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}


def config_map(row: KubernetesConfigMap) -> dict[str, Any]:
    meta = _metadata(row, row.name, row.trust_domain.name)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(row.data or {})}


def secret(row: KubernetesSecret) -> dict[str, Any]:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in (row.data or {}).items()}
    meta = _metadata(row, row.name, row.trust_domain.name)
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": encoded}


def pod_labels(row: KubernetesServiceInstance) -> dict[str, str]:
    labels = {INSTANCE_LABEL: label_value(row.name)}
    if row.slice is not None:
        labels[SLICE_LABEL] = label_value(row.slice.name)
        if row.slice.service is not None:
            labels[SERVICE_LABEL] = label_value(row.slice.service.name)
    return labels


def container_name(image_name: str) -> str:
    last = image_name.rpartition("/")[2].lower()
    return (_NOT_DNS_CHARS.sub("-", last)[:63].strip("-")) or "main"


def pod(
    row: KubernetesServiceInstance,
    config_mounts: Sequence[KubernetesConfigVolumeMount] = (),
    secret_mounts: Sequence[KubernetesSecretVolumeMount] = (),
) -> dict[str, Any]:
    """One container from the image; one volume per mount row, named by the mount's id (never collide)."""
    assert row.image is not None and row.trust_domain is not None
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for mount in config_mounts:
        volumes.append({"name": f"config-{mount.id}", "configMap": {"name": mount.config.name}})
        mounts.append(_volume_mount(f"config-{mount.id}", mount.mount_path, mount.sub_path))
    for secret_mount in secret_mounts:
        name = f"secret-{secret_mount.id}"
        volumes.append({"name": name, "secret": {"secretName": secret_mount.secret.name}})
        mounts.append(_volume_mount(name, secret_mount.mount_path, secret_mount.sub_path))
    container: dict[str, Any] = {"name": container_name(row.image.name), "image": row.image.reference}
    if mounts:
        container["volumeMounts"] = mounts
    spec: dict[str, Any] = {"containers": [container]}
    if volumes:
        spec["volumes"] = volumes
    principal = row.slice.principal if row.slice is not None else None
    if principal is not None:
        spec["serviceAccountName"] = principal.name
    meta = _metadata(row, row.name, row.trust_domain.name, pod_labels(row))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _volume_mount(volume: str, path: str, sub_path: str | None) -> dict[str, Any]:
    mount = {"name": volume, "mountPath": path, "readOnly": True}
    if sub_path:
        mount["subPath"] = sub_path
    return mount


def service(row: Service, ports: Sequence[ServicePort]) -> dict[str, Any]:
    """NodePort when a port has an external (node) port, else ClusterIP; selects the pods of its slices."""
    assert row.trust_domain is not None
    node_port = any(p.external_port is not None for p in ports)
    spec_ports = []
    for port in ports:
        target = port.internal_port or port.external_port
        entry: dict[str, Any] = {
            "name": port.name or f"{port.protocol.lower()}-{target}",
            "protocol": port.protocol,
            "port": target,
            "targetPort": target,
        }
        if port.external_port is not None:
            entry["nodePort"] = port.external_port
        spec_ports.append(entry)
    spec = {
        "type": "NodePort" if node_port else "ClusterIP",
        "selector": {SERVICE_LABEL: label_value(row.name)},
        "ports": spec_ports,
    }
    meta = _metadata(row, row.name, row.trust_domain.name)
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}
