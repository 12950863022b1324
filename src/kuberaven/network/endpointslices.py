"""EndpointSlices as the source of a load balancer's members (network/).

    start-up: members_target() asks API discovery which the cluster serves, before the informers are declared:
        discovery.k8s.io/v1 EndpointSlice ─► else v1beta1 (Kubernetes 1.20) ─► else v1 Endpoints
    EndpointSlice events ──► SliceCache: the slices of each Service (label kubernetes.io/service-name), by name
        ──► as_endpoints(): one Endpoints-shaped object per Service, which services.py reads as it reads Endpoints

Slices are many per Service and come one by one: a Service's set is
complete once its slices were listed — by the informer (relisted events)
or, after a restart that resumed the watch and listed nothing, by one LIST
of that Service's slices (a label selector, paged with limit=). Events that
arrive meanwhile are kept when newer (resourceVersions compared as etcd
revisions); a deleted slice is remembered as deleted so that a slower LIST
cannot bring it back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx

from ..kube.client import KubeClient
from ..kube.errors import ApiError
from ..kube.projection import Projection
from ..kube.resources import Discovery, UnknownKind
from ..raven.informers import revision
from ..raven.watcher import WatchTarget

log = logging.getLogger(__name__)

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SLICE_VERSIONS = ("discovery.k8s.io/v1", "discovery.k8s.io/v1beta1")
ENDPOINTS = WatchTarget("v1", "Endpoints")
# What the translation reads of a slice (the informer decodes only these).
SLICE_FIELDS = ("metadata.labels", "addressType", "endpoints", "ports")
ENDPOINTS_FIELDS = ("subsets",)
_SLICE = Projection(SLICE_FIELDS)
PAGE = 100


async def members_target(client: KubeClient) -> WatchTarget:
    """The newest EndpointSlice version the cluster serves, else Endpoints (served by every version,
    so also the answer when discovery itself fails: a cluster's other components are not held up)."""
    discovery = Discovery(client)
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


@dataclass
class _Slice:
    revision: int | None
    obj: dict[str, Any] | None  # None: deleted


@dataclass
class SliceCache:
    """The slices of each Service, by slice name, and which Services' sets are complete."""

    slices: dict[str, dict[str, _Slice]] = field(default_factory=dict)
    complete: set[str] = field(default_factory=set)

    def on_event(self, key: str, slice_: dict[str, Any], deleted: bool, relisted: bool) -> None:
        meta = slice_["metadata"]
        self._keep(key, meta["name"], _Slice(revision(meta.get("resourceVersion")), None if deleted else slice_))
        if relisted:  # the informer lists every slice: this Service's set fills up from it
            self.complete.add(key)

    def on_list(self, key: str, listed: list[dict[str, Any]]) -> None:
        """A LIST of the Service's slices: each kept unless an event gave a newer one (or its deletion)."""
        for slice_ in listed:
            meta = slice_["metadata"]
            self._keep(key, meta["name"], _Slice(revision(meta.get("resourceVersion")), slice_))
        self.complete.add(key)

    def _keep(self, key: str, name: str, new: _Slice) -> None:
        held = self.slices.setdefault(key, {})
        old = held.get(name)
        if old is None or old.revision is None or new.revision is None or new.revision >= old.revision:
            held[name] = new

    def of(self, key: str) -> list[dict[str, Any]]:
        return [s.obj for _, s in sorted(self.slices.get(key, {}).items()) if s.obj is not None]

    def forget(self, key: str) -> None:
        self.slices.pop(key, None)
        self.complete.discard(key)


async def list_slices(client: KubeClient, target: WatchTarget, namespace: str, name: str) -> list[dict[str, Any]]:
    """One Service's slices, by label selector, a page at a time."""
    path = f"/apis/{target.api_version}/namespaces/{namespace}/endpointslices"
    params = {"labelSelector": f"{SERVICE_NAME_LABEL}={name}"}
    return [_SLICE.apply(item) async for item in client.list_objects(path, params, page_size=PAGE)]


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
        ports = [{"name": p.get("name") or "", "port": p["port"], "protocol": p.get("protocol", "TCP")}
                 for p in slice_.get("ports") or [] if p.get("port") is not None]  # fmt: skip
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
