"""Annotations the translator writes on Kubernetes objects (network/, the API edge).

translator.py (Namespace summary), loadbalancers.py (Service summary), pods.py (VIF)
    ──► annotate(): merge patch under the object's resourceVersion; on 409 re-read and
        patch again only if the value is still not there (deleted meanwhile: nothing to do)
loadbalancers.py (a LoadBalancer Service's cleanup finalizer) ──► finalize(): the same, of metadata.finalizers
"""

from __future__ import annotations

import json
from collections.abc import Callable
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


async def annotate(
    client: KubeClient, kind: str, obj: dict[str, Any], key: str, value: str | None
) -> dict[str, Any] | None:
    """Write annotation ``key`` = ``value`` on ``obj`` (None: remove it), guarded by its resourceVersion: the
    object as written (the API server's answer, whole), or None when it was there already or the object is gone."""
    return await _patch_metadata(
        client,
        kind,
        obj,
        lambda meta: (meta.get("annotations") or {}).get(key) == value,
        lambda meta: {"annotations": {key: value}},
        f"annotation {key}",
    )


async def finalize(client: KubeClient, kind: str, obj: dict[str, Any], finalizer: str, held: bool) -> dict[str, Any]:
    """Add ``finalizer`` to ``obj``'s (``held``) or take it out, keeping the others, guarded by its
    resourceVersion: the object as it stands after (``obj`` itself when nothing needed writing or it is gone)."""

    def wanted(meta: dict[str, Any]) -> list[str]:
        others = [f for f in meta.get("finalizers") or [] if f != finalizer]
        return [*others, finalizer] if held else others

    written = await _patch_metadata(
        client,
        kind,
        obj,
        lambda meta: (finalizer in (meta.get("finalizers") or [])) == held,
        lambda meta: {"finalizers": wanted(meta)},
        f"finalizer {finalizer}",
    )
    return written or obj


async def _patch_metadata(
    client: KubeClient,
    kind: str,
    obj: dict[str, Any],
    done: Callable[[dict[str, Any]], bool],
    change: Callable[[dict[str, Any]], dict[str, Any]],
    what: str,
) -> dict[str, Any] | None:
    """A merge patch of ``change(metadata)`` under the object's resourceVersion, unless ``done(metadata)``; on
    409 the object is read again and the patch made anew from what it now holds. The object as written, or None
    when nothing was written (done already, or the object gone or replaced)."""
    meta = obj["metadata"]
    path = object_path(kind, meta.get("namespace"), meta["name"])
    for _ in range(ATTEMPTS):
        if done(meta):
            return None
        body = {"metadata": {"resourceVersion": meta["resourceVersion"], **change(meta)}}
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
    raise Waiting(f"{kind} {meta['name']} keeps changing; {what} not written yet")
