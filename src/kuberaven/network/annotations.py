"""Annotations the translator writes on Kubernetes objects (network/, the API edge).

translator.py (Namespace summary), loadbalancers.py (Service summary), pods.py (VIF)
    ──► annotate(): merge patch under the object's resourceVersion; on 409 re-read and
        patch again only if the value is still not there (deleted meanwhile: nothing to do)
"""

from __future__ import annotations

import json
from typing import Any

from ..kube.client import KubeClient
from ..kube.errors import Conflict, NotFound
from ..watch.workqueue import Waiting

ANNOTATION = "kuberaven.io/network"  # the summary of Namespaces and Services
STATE_VERSION = 1
MERGE_PATCH = "application/merge-patch+json"
ATTEMPTS = 5


def object_path(kind: str, namespace: str | None, name: str) -> str:
    if kind == "Namespace":
        return f"/api/v1/namespaces/{name}"
    return f"/api/v1/namespaces/{namespace}/{kind.lower()}s/{name}"


def summary(backend: str, fields: dict[str, Any]) -> str:
    """The versioned summary of a Namespace's or Service's translation."""
    return json.dumps({"version": STATE_VERSION, "backend": backend, **fields}, sort_keys=True)


async def annotate(client: KubeClient, kind: str, obj: dict[str, Any], key: str, value: str) -> dict[str, Any] | None:
    """Write annotation ``key`` = ``value`` on ``obj``, guarded by its resourceVersion: the object as written
    (the API server's answer, whole), or None when it was there already or the object is gone."""
    meta = obj["metadata"]
    path = object_path(kind, meta.get("namespace"), meta["name"])
    for _ in range(ATTEMPTS):
        if (meta.get("annotations") or {}).get(key) == value:
            return None
        body = {"metadata": {"resourceVersion": meta["resourceVersion"], "annotations": {key: value}}}
        try:
            written: dict[str, Any] = await client.request("PATCH", path, body=body, content_type=MERGE_PATCH)
            return written
        except NotFound:
            return None  # deleted meanwhile: its DELETED event cleans up
        except Conflict:
            try:
                current = await client.request("GET", path)
            except NotFound:
                return None
            if current["metadata"]["uid"] != meta["uid"]:
                return None
            meta = current["metadata"]
    raise Waiting(f"{kind} {meta['name']} keeps changing; annotation not written yet")
