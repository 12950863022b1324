"""Which slice a pod belongs to (pull/): its top controller, found through ownerReferences.

    Pod ─controller→ ReplicaSet ─controller→ Deployment        slice "my-deployment"
    Pod ─controller→ Job ─controller→ CronJob                  slice "my-cronjob"
    Pod ─controller→ StatefulSet | DaemonSet | any custom kind slice named after it
    Pod with no controller                                      slice of its own, named after the pod

A label ``xos_slice_name`` on the top controller overrides the name (as in
the original). Owners are read with GET (any kind, through discovery) and
cached by uid for ``ttl`` seconds, so 10,000 pods of one Deployment cost two
requests. An owner that is gone or unreadable ends the walk where it stands.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..kube.client import KubeClient
from ..kube.errors import ApiError
from ..kube.resources import Discovery, UnknownKind
from .writer import SliceRef

log = logging.getLogger(__name__)
SLICE_NAME_LABEL = "xos_slice_name"
MAX_DEPTH = 8


class OwnerResolver:
    def __init__(self, client: KubeClient, discovery: Discovery, ttl: float = 300.0) -> None:
        self.client = client
        self.discovery = discovery
        self.ttl = ttl
        # uid → (fetched at, the owner's own controller reference, its labels)
        self._owners: dict[str, tuple[float, dict[str, Any] | None, dict[str, str]]] = {}

    async def slice_for(self, pod: dict[str, Any]) -> SliceRef:
        meta = pod["metadata"]
        reference = _controller(meta)
        if reference is None:
            return SliceRef(meta["name"], "Pod", meta.get("uid"))
        labels: dict[str, str] = {}
        for _ in range(MAX_DEPTH):
            parent, labels = await self._owner(reference, meta.get("namespace"))
            if parent is None:
                break
            reference = parent
        name = labels.get(SLICE_NAME_LABEL) or reference["name"]
        return SliceRef(name, reference["kind"], reference.get("uid"))

    async def _owner(self, reference: dict[str, Any], namespace: str | None) -> tuple[dict[str, Any] | None, dict]:
        uid = reference.get("uid", "")
        cached = self._owners.get(uid)
        if cached is not None and time.monotonic() - cached[0] < self.ttl:
            return cached[1], cached[2]
        parent, labels = None, {}
        try:
            resource = await self.discovery.resolve(reference["apiVersion"], reference["kind"])
            owner = await self.client.request("GET", resource.path(namespace, reference["name"]))
            if owner["metadata"].get("uid") == uid:  # not a namesake created since
                parent = _controller(owner["metadata"])
                labels = owner["metadata"].get("labels") or {}
        except UnknownKind as error:
            log.debug("owner kind not served: %s", error)
        except ApiError as error:
            if error.code not in (403, 404):
                raise  # transient: the batch is retried
            log.debug("owner %s/%s not readable: %s", reference["kind"], reference["name"], error)
        self._owners[uid] = (time.monotonic(), parent, labels)
        return parent, labels


def _controller(meta: dict[str, Any]) -> dict[str, Any] | None:
    return next((ref for ref in meta.get("ownerReferences") or () if ref.get("controller")), None)
