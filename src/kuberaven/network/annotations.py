"""Annotations the translator writes on Kubernetes objects (network/, the API edge).

translator.py (Namespace summary), loadbalancers.py (Service summary), pods.py (VIF)
    ──► annotate(): merge patch under the object's resourceVersion; on 409 re-read, then: a value given as a
        function of the object is computed again from the object as it now stands; a value given as is is sent
        again only while the annotation is still the one it was computed beside (else Waiting: the writer's
        reconcile computes it again from the newest state); done already, or deleted meanwhile: nothing to do
loadbalancers.py (a LoadBalancer Service's cleanup finalizer) ──► finalize(): the same, of metadata.finalizers

So a conflict never re-sends a value computed from what it overwrote.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from typing import Any, Final

from ..kube.client import KubeClient
from ..kube.errors import Conflict, NotFound
from ..watch.workqueue import Waiting

ANNOTATION = "kuberaven.io/network"  # the summary of Namespaces and Services
STATE_VERSION = 1
MERGE_PATCH = "application/merge-patch+json"
ATTEMPTS = 5


class Keep(enum.Enum):
    """What a function of the object returns when nothing is to be written on it."""

    KEEP = "keep"


KEEP: Final = Keep.KEEP
Value = str | None  # an annotation's text; None: removed
Compute = Callable[[dict[str, Any]], Value | Keep]  # the value wanted, given the object as it stands


def object_path(kind: str, namespace: str | None, name: str) -> str:
    if kind == "Namespace":
        return f"/api/v1/namespaces/{name}"
    return f"/api/v1/namespaces/{namespace}/{kind.lower()}s/{name}"


def summary(backend: str, fields: dict[str, Any]) -> str:
    """The versioned summary of a Namespace's or Service's translation."""
    return json.dumps({"version": STATE_VERSION, "backend": backend, **fields}, sort_keys=True)


async def annotate(
    client: KubeClient, kind: str, obj: dict[str, Any], key: str, value: Value | Compute
) -> dict[str, Any] | None:
    """Write annotation ``key`` on ``obj``, guarded by its resourceVersion: ``value`` (None: remove it), or, given
    as a function of the object, what it returns (KEEP: nothing), computed again from the object read anew after
    each conflict. A value given as is is sent again after a conflict only while the annotation is the one
    ``obj`` had: another writer's newer value is never overwritten with one computed before it (Waiting: the
    caller's reconcile computes it again). The object as written (the API server's answer, whole), or None when
    nothing was written (there already, KEEP, or the object gone)."""
    compute: Compute = value if callable(value) else _given(key, value, _annotation(obj, key))

    def change(current: dict[str, Any]) -> dict[str, Any] | None:
        found = compute(current)
        if found is KEEP or _annotation(current, key) == found:
            return None
        return {"annotations": {key: found}}

    return await _patch_metadata(client, kind, obj, change, f"annotation {key}")


def _annotation(obj: dict[str, Any], key: str) -> str | None:
    annotations: dict[str, str] = obj["metadata"].get("annotations") or {}
    return annotations.get(key)


def _given(key: str, value: Value, beside: Value) -> Compute:
    """A value given as is: written while the annotation is still ``beside`` (what it was computed beside)."""

    def compute(current: dict[str, Any]) -> Value | Keep:
        found = _annotation(current, key)
        if found != beside and found != value:
            meta = current["metadata"]
            raise Waiting(f"{meta.get('namespace') or ''}/{meta['name']}: annotation {key} changed meanwhile")
        return value

    return compute


async def finalize(client: KubeClient, kind: str, obj: dict[str, Any], finalizer: str, held: bool) -> dict[str, Any]:
    """Add ``finalizer`` to ``obj``'s (``held``) or take it out, keeping the others, guarded by its
    resourceVersion: the object as it stands after (``obj`` itself when nothing needed writing or it is gone)."""

    def change(current: dict[str, Any]) -> dict[str, Any] | None:
        finalizers = current["metadata"].get("finalizers") or []
        if (finalizer in finalizers) == held:
            return None
        others = [f for f in finalizers if f != finalizer]
        return {"finalizers": [*others, finalizer] if held else others}

    written = await _patch_metadata(client, kind, obj, change, f"finalizer {finalizer}")
    return written or obj


async def _patch_metadata(
    client: KubeClient,
    kind: str,
    obj: dict[str, Any],
    change: Callable[[dict[str, Any]], dict[str, Any] | None],
    what: str,
) -> dict[str, Any] | None:
    """A merge patch of the metadata ``change(object)`` gives (None: nothing to change) under the object's
    resourceVersion; on 409 the object is read again and the patch made anew from what it now holds. The object
    as written, or None when nothing was written (done already, or the object gone or replaced)."""
    meta = obj["metadata"]
    path = object_path(kind, meta.get("namespace"), meta["name"])
    for _ in range(ATTEMPTS):
        patch = change(obj)
        if patch is None:
            return None
        body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"], **patch}}
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
            obj = current
    raise Waiting(f"{kind} {meta['name']} keeps changing; {what} not written yet")
