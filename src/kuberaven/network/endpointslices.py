"""EndpointSlices as the source of a load balancer's members (network/).

    start-up: members_target() asks API discovery which the cluster serves, before the informers are declared:
        discovery.k8s.io/v1 EndpointSlice ─► else v1beta1 (Kubernetes 1.20) ─► else v1 Endpoints
    the slices informer's store, indexed by Service (label kubernetes.io/service-name: SERVICE_INDEX)
        ──► as_endpoints(): one Endpoints-shaped object per Service, which services.py reads as it reads Endpoints

Slices are many per Service and come one by one: a Service's set is
complete once its slices were listed — by the informer, or, after a
restart that resumed the watch and listed nothing, by one LIST of that
Service's slices (a label selector, paged with limit=) that the lister
(watch/store.py) runs and keeps unless the watch has given newer.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx2 as httpx

from ..kube.client import KubeClient
from ..kube.errors import ApiError
from ..kube.resources import Discovery, UnknownKind
from ..watch.watcher import WatchTarget

log = logging.getLogger(__name__)

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SLICE_VERSIONS = ("discovery.k8s.io/v1", "discovery.k8s.io/v1beta1")
ENDPOINTS = WatchTarget("v1", "Endpoints")
# What the translation reads of a slice (the informer decodes only these).
SLICE_FIELDS = ("metadata.labels", "addressType", "endpoints", "ports")
ENDPOINTS_FIELDS = ("subsets",)
SERVICE_INDEX = "service"  # the slices store's index: namespace/service → its slices


async def members_target(client: KubeClient, discovery: Discovery | None = None) -> WatchTarget:
    """The newest EndpointSlice version the cluster serves, else Endpoints (served by every version,
    so also the answer when discovery itself fails: a cluster's other components are not held up).

    ``discovery``: the informers' own, so that the slices' informer finds the answer cached."""
    discovery = discovery or Discovery(client)
    for api_version in SLICE_VERSIONS:
        try:
            await discovery.resolve(api_version, "EndpointSlice")
        except UnknownKind:
            continue
        except (ApiError, httpx.HTTPError) as error:
            log.warning("API discovery of EndpointSlices failed (%s): members come from Endpoints", error)
            return ENDPOINTS
        return WatchTarget(api_version, "EndpointSlice")
    return ENDPOINTS


def is_slices(target: WatchTarget) -> bool:
    return target.kind == "EndpointSlice"


def service_key(slice_: dict[str, Any]) -> str | None:
    """namespace/service of a slice; None for a slice of no Service (made by hand, without the label)."""
    meta = slice_["metadata"]
    service = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
    return f"{meta['namespace']}/{service}" if service else None


def as_endpoints(namespace: str, name: str, slices: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A Service's slices as one Endpoints object (a subset per IPv4 slice); None when it has none.

    An endpoint is ready unless its ``conditions.ready`` is false (unknown counts as ready, as the
    API says); its node is ``nodeName`` (v1), or the ``kubernetes.io/hostname`` topology (v1beta1).
    """
    if not slices:
        return None
    subsets = []
    for slice_ in slices:
        if slice_.get("addressType", "IPv4") != "IPv4":
            continue
        ports = [
            {"name": p.get("name") or "", "port": p["port"], "protocol": p.get("protocol", "TCP")}
            for p in slice_.get("ports") or []
            if p.get("port") is not None
        ]
        ready: list[dict[str, Any]] = []
        not_ready: list[dict[str, Any]] = []
        for endpoint in slice_.get("endpoints") or []:
            node = endpoint.get("nodeName") or (endpoint.get("topology") or {}).get("kubernetes.io/hostname")
            base = {k: v for k, v in (("nodeName", node), ("targetRef", endpoint.get("targetRef"))) if v}
            addresses = [{"ip": address, **base} for address in endpoint.get("addresses") or []]
            is_ready = (endpoint.get("conditions") or {}).get("ready") is not False
            (ready if is_ready else not_ready).extend(addresses)
        subsets.append({"addresses": ready, "notReadyAddresses": not_ready, "ports": ports})
    return {"metadata": {"namespace": namespace, "name": name}, "subsets": subsets}
