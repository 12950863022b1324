"""KubernetesResourceInstance: arbitrary YAML, applied as it is (provisioning/, the escape hatch).

    resource_definition (YAML documents) ──► discovery (any group/version/kind)
        ──► server-side apply of each document ──► applied_objects + kubectl_state
        ──► objects dropped from the YAML since the last apply are deleted (pruned)

No kubectl: every document goes through the API with the field manager
"kuberaven". The row records exactly what was applied, also when a later
document fails, so a delete of the row removes everything it made.
kubectl_state is CREATED on the first successful apply, UPDATED on
every later one, DELETED once its objects are gone (the original's values).
"""

from __future__ import annotations

import copy
from typing import Any

import sqlalchemy as sa
import yaml
from sqlalchemy.orm import Session, selectinload

from ..kube.errors import ApiError
from ..kube.resources import Discovery, Resource, UnknownKind
from ..model.journal import SyncTombstone
from ..model.workloads import KubectlState, KubernetesResourceInstance
from . import manifests
from .steps import Applied, Context, Step, SyncError, Work, check_ownership, delete_object

KRI = KubernetesResourceInstance
ObjectRef = dict[str, Any]  # apiVersion, kind, namespace, name (and uid when applied)


def parse_documents(text: str | None) -> list[dict[str, Any]]:
    """The YAML documents of a resource_definition (none: delete what was applied); a SyncError names a bad one."""
    try:
        loaded = list(yaml.safe_load_all(text or ""))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SyncError(f"resource_definition is not valid YAML{where}: {error}") from None
    documents = [d for d in loaded if d is not None]
    for number, document in enumerate(documents, 1):
        if not isinstance(document, dict):
            raise SyncError(f"document {number}: must be a mapping, not {type(document).__name__}")
        for field in ("apiVersion", "kind"):
            if not isinstance(document.get(field), str):
                raise SyncError(f"document {number}: {field} is required")
        if not isinstance(document.get("metadata"), dict) or not document["metadata"].get("name"):
            raise SyncError(f"document {number} ({document['kind']}): metadata.name is required")
    return documents


def same_object(a: ObjectRef, b: ObjectRef) -> bool:
    keys = ("apiVersion", "kind", "namespace", "name")
    return all(a.get(k) == b.get(k) for k in keys)


class ResourceInstanceStep(Step):
    model = KRI
    resource = Resource("", "v1", "KubernetesResourceInstance", "", False)  # not one kind: see apply()

    def in_cluster(self, cluster_id: int) -> list[sa.ColumnElement[bool]]:
        return [KRI.owner_id == cluster_id]

    def load_options(self) -> list[Any]:
        return [selectinload(KRI.trust_domain)]

    def work(self, session: Session, row: Any) -> Work:
        item = Work.of(row)
        item.extra = {
            "definition": row.resource_definition,
            "previous": list(row.applied_objects or []),
            "state": row.kubectl_state,
            "namespace": row.trust_domain.name if row.trust_domain is not None else "default",
        }
        return item

    async def apply(self, ctx: Context, work: Work) -> Applied:
        documents = parse_documents(work.extra["definition"])
        resolved = [await self._resolve(ctx.discovery, n, d) for n, d in enumerate(documents, 1)]
        previous: list[ObjectRef] = work.extra["previous"]
        applied: list[ObjectRef] = []
        for number, (document, resource) in enumerate(zip(documents, resolved, strict=True), 1):
            ref = self._reference(document, resource, work.extra["namespace"])
            try:
                path = resource.path(ref["namespace"], ref["name"])
                if not any(same_object(ref, p) for p in previous):
                    await check_ownership(ctx.client, path, work.reference, work.adopt)
                obj = await ctx.client.apply(path, _labelled(document, ref, work.reference))
            except (ApiError, SyncError) as error:
                recorded = applied + [p for p in previous if not any(same_object(p, a) for a in applied)]
                raise SyncError(
                    f"document {number} ({ref['kind']} {_name(ref)}): {error}", values={"applied_objects": recorded}
                ) from None
            applied.append({**ref, "uid": obj["metadata"]["uid"]})
        for old in previous:
            if not any(same_object(old, a) for a in applied):
                await self._delete(ctx, old)
        if not applied:
            state = KubectlState.DELETED
        elif work.extra["state"] in (None, KubectlState.DELETED):
            state = KubectlState.CREATED
        else:
            state = KubectlState.UPDATED
        return Applied(None, f"{len(applied)} objects", {"applied_objects": applied, "kubectl_state": state})

    @staticmethod
    async def _resolve(discovery: Discovery, number: int, document: dict[str, Any]) -> Resource:
        try:
            return await discovery.resolve(document["apiVersion"], document["kind"])
        except UnknownKind as error:
            raise SyncError(f"document {number} ({document['kind']} {document['metadata']['name']}): {error}") from None

    @staticmethod
    def _reference(document: dict[str, Any], resource: Resource, default_namespace: str) -> ObjectRef:
        namespace = (document["metadata"].get("namespace") or default_namespace) if resource.namespaced else None
        return {
            "apiVersion": document["apiVersion"],
            "kind": document["kind"],
            "namespace": namespace,
            "name": document["metadata"]["name"],
        }

    async def _delete(self, ctx: Context, ref: ObjectRef) -> None:
        try:
            resource = await ctx.discovery.resolve(ref["apiVersion"], ref["kind"])
        except UnknownKind:
            return  # its kind is gone (a CRD removed), and with it the object
        await delete_object(ctx.client, resource, ref.get("namespace"), ref["name"])

    async def delete(self, ctx: Context, tombstone: SyncTombstone) -> None:
        for ref in tombstone.applied_objects or []:
            await self._delete(ctx, ref)


def _labelled(document: dict[str, Any], ref: ObjectRef, reference: str) -> dict[str, Any]:
    manifest = copy.deepcopy(document)
    meta = manifest["metadata"]
    if ref["namespace"] is not None:
        meta["namespace"] = ref["namespace"]
    meta["labels"] = {**(meta.get("labels") or {}), manifests.MANAGED_BY: manifests.MANAGER}
    meta["annotations"] = {**(meta.get("annotations") or {}), manifests.ROW_ANNOTATION: reference}
    _default_protocols(manifest)
    return manifest


def _default_protocols(value: Any) -> None:
    """Say ``protocol: TCP`` where a port omits it.

    Server-side apply before Kubernetes 1.21 rejects a port list whose items
    omit their key field "protocol" (500 "associative list with keys has an
    element that omits key field"), although TCP is the default; kubectl's
    client-side apply never met this. Filling in the default keeps such YAML working.
    """
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "ports" and isinstance(inner, list):
                for port in inner:
                    if isinstance(port, dict) and ("port" in port or "containerPort" in port):
                        port.setdefault("protocol", "TCP")
            _default_protocols(inner)
    elif isinstance(value, list):
        for inner in value:
            _default_protocols(inner)


def _name(ref: ObjectRef) -> str:
    return "/".join(p for p in (ref.get("namespace"), ref["name"]) if p)
