"""Sync steps (provisioning/): the contract every step keeps, and what all steps share.

    loop.py ──► Step.load() (worker thread: rows → Work, manifests built)
            ──► Step.apply() (asyncio: server-side apply, field manager "kuberaven")
            ──► loop.py records enacted / backend_status

One Step per kind of row: objects.py (Namespace, ServiceAccount, ConfigMap,
Secret, Service: one manifest per row), pods.py (Pod, with its mounts) and
resources.py (the raw YAML of KubernetesResourceInstances). They run in
dependency order (loop.default_steps()): Namespace before ServiceAccount
before ConfigMap/Secret before Pod before Service, then the raw YAML. A row
is dirty when ``enacted`` is unset or older than ``updated``; a pod is also
dirty when one of its mounts is, a Service when one of its ports is.
Whatever the kind, an object kuberaven did not make is taken only on
``adopt``, and deleted only if it is kuberaven's.

One writer per column: provisioning writes what it did (enacted,
backend_status, backend_code, backend_handle); the observed columns of a row
(uid, resource_version, and a pod's IPs and phase) are the inventory's alone,
which fills them from the watch event of the object applied (inventory/objects.py,
inventory/pods.py).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import Session, selectinload

from ..kube.client import KubeClient
from ..kube.errors import ApiError, NotFound
from ..kube.resources import Discovery, Resource
from ..model.base import Model, SyncCode
from ..model.cluster import TrustDomain
from ..model.documents import qualified_name
from ..model.journal import SyncTombstone
from . import manifests

log = logging.getLogger(__name__)

# Never deleted by kuberaven, whoever asks.
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", "default"})


class SyncError(Exception):
    """A row could not be applied; the message goes to backend_status as it is.

    ``values`` are stored on the row with the failure (what was applied before it).
    """

    def __init__(self, message: str, values: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.values = values or {}


@dataclass
class Work:
    """One row to apply, read in a worker thread; all the asyncio side needs."""

    model: str
    row_id: int
    name: str
    updated: dt.datetime  # enacted is set to this: a change made meanwhile stays dirty
    manifest: dict[str, Any] | None = None
    uid: str | None = None  # as the inventory last saw it (None: not yet, or the object is gone)
    new: bool = True  # never applied, or its object was deleted since: a provisioning, not an update
    adopt: bool = False
    waiting: str | None = None  # a dependency is not in Kubernetes yet: why
    dirty: bool = True  # changed since last applied (a full pass also re-applies rows that did not change)
    # Rows applied as part of this one (mounts, ports): (table, id, updated).
    parts: list[tuple[sa.Table, int, dt.datetime]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # step-specific (KubernetesResourceInstance)

    @classmethod
    def of(cls, row: Any) -> Work:
        dirty = row.enacted is None or row.enacted < row.updated
        return cls(
            type(row).__name__,
            row.id,
            row.name,
            row.updated,
            uid=row.uid,
            new=row.enacted is None,
            adopt=row.adopt,
            dirty=dirty,
        )

    @property
    def key(self) -> tuple[str, int]:
        return (self.model, self.row_id)

    @property
    def reference(self) -> str:
        """The row as the annotation ``kuberaven.io/row`` names it."""
        return f"{self.model}/{self.row_id}"

    @property
    def token(self) -> tuple[Any, ...]:
        """The version of the row and its parts: a new one cancels a pending backoff."""
        return (self.updated, *sorted((t.name, i, u) for t, i, u in self.parts))


@dataclass
class Applied:
    """What a successful apply leaves on the row."""

    uid: str | None
    handle: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """What steps share: the cluster's client, and the objects known to be kuberaven's."""

    client: KubeClient
    cluster_id: int
    verified: set[str] = field(default_factory=set)  # uids checked (or made) to be ours
    discovery: Discovery = field(init=False)  # apiVersion/kind → path, for KubernetesResourceInstance

    def __post_init__(self) -> None:
        self.discovery = Discovery(self.client)


def dirty(model: type[Model]) -> sa.ColumnElement[bool]:
    return sa.or_(model.enacted.is_(None), model.updated > model.enacted)  # type: ignore[attr-defined]


def managed(model: type[Model]) -> list[sa.ColumnElement[bool]]:
    return [model.xos_managed.is_(True), model.no_sync.is_(False)]  # type: ignore[attr-defined]


def waiting_for(row: Model | None) -> str | None:
    """Why a row depending on ``row`` must wait, or None when ``row`` is in Kubernetes (or not ours)."""
    if row is None or not row.xos_managed or row.enacted is not None:  # type: ignore[attr-defined]
        return None
    text = f"waiting for {type(row).__name__} {qualified_name(row)}"
    if row.backend_code == SyncCode.ERROR:  # type: ignore[attr-defined]
        text += f" ({row.backend_status})"  # type: ignore[attr-defined]
    return text


class Step:
    """Rows of one model ↔ one kind of Kubernetes object."""

    model: ClassVar[type[Model]]
    resource: ClassVar[Resource]

    def rows(self, session: Session, cluster_id: int, full: bool) -> Sequence[Any]:
        """The managed rows of the cluster to apply (all of them when ``full``)."""
        model = self.model
        query = sa.select(model).where(*managed(model)).where(*self.in_cluster(cluster_id))
        if not full:
            query = query.where(self.is_dirty())
        return session.scalars(query.options(*self.load_options()).order_by(model.id)).all()

    def in_cluster(self, cluster_id: int) -> list[sa.ColumnElement[bool]]:
        td = TrustDomain
        return [self.model.trust_domain_id.in_(sa.select(td.id).where(td.owner_id == cluster_id))]  # type: ignore[attr-defined]

    def is_dirty(self) -> sa.ColumnElement[bool]:
        return dirty(self.model)

    def load_options(self) -> list[Any]:
        return [selectinload(self.model.trust_domain)]  # type: ignore[attr-defined]

    def load(self, session: Session, cluster_id: int, full: bool) -> list[Work]:
        return [self.work(session, row) for row in self.rows(session, cluster_id, full)]

    def work(self, session: Session, row: Any) -> Work:
        item = Work.of(row)
        item.waiting = self.waiting(row)
        if item.waiting is None:
            item.manifest = self.manifest(row)
        return item

    def waiting(self, row: Any) -> str | None:
        return waiting_for(row.trust_domain)

    def manifest(self, row: Any) -> dict[str, Any]:
        raise NotImplementedError

    # --- the Kubernetes side ----------------------------------------------

    async def apply(self, ctx: Context, work: Work) -> Applied:
        assert work.manifest is not None
        meta = work.manifest["metadata"]
        namespace, name = meta.get("namespace"), meta["name"]
        path = self.resource.path(namespace, name)
        if work.uid is None or work.uid not in ctx.verified:
            await check_ownership(ctx.client, path, work.reference, work.adopt)
        try:
            obj = await ctx.client.apply(path, work.manifest)
        except ApiError as error:
            obj = await self.on_apply_error(ctx, work, path, error)
        uid = obj["metadata"]["uid"]
        ctx.verified.add(uid)
        handle = "/".join(p for p in (namespace, name, uid) if p)
        # Nothing of the observed columns (uid, resource_version, a pod's IPs, phase ...): they have one writer,
        # the inventory, which sees the object applied moments later; the pod lifecycle decides from them what a
        # change announces.
        return Applied(uid, handle)

    async def on_apply_error(self, ctx: Context, work: Work, path: str, error: ApiError) -> dict[str, Any]:
        raise error

    async def delete(self, ctx: Context, tombstone: SyncTombstone) -> None:
        """Delete the object a deleted row stood for, if it is still kuberaven's."""
        assert tombstone.name is not None
        await delete_object(ctx.client, self.resource, tombstone.namespace, tombstone.name)


def _object_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return "/".join(p for p in (meta.get("namespace"), meta.get("name")) if p)


async def check_ownership(client: KubeClient, path: str, reference: str, adopt: bool) -> None:
    """An object of the same name that kuberaven did not make for the row ``reference`` is taken only on adopt."""
    try:
        existing = await client.request("GET", path)
    except NotFound:
        return
    if adopt or manifests.is_ours(existing, reference):
        return
    model = reference.partition("/")[0]
    raise SyncError(
        f"{existing.get('kind', 'object')} {_object_name(existing)} already exists and was not created by kuberaven "
        f"for this row; set adopt: true on the {model} to manage it"
    )


async def delete_object(client: KubeClient, resource: Resource, namespace: str | None, name: str) -> None:
    """Delete one object unless it is gone, a system namespace, or not made by kuberaven."""
    if resource.kind == "Namespace" and name in SYSTEM_NAMESPACES:
        log.warning("not deleting system namespace %s", name)
        return
    path = resource.path(namespace, name)
    try:
        existing = await client.request("GET", path)
        if not manifests.is_ours(existing):
            log.warning("not deleting %s %s: kuberaven did not create it", resource.kind, _object_name(existing))
            return
        uid = existing["metadata"]["uid"]
        await client.request("DELETE", path, body={"preconditions": {"uid": uid}, "propagationPolicy": "Background"})
    except NotFound:
        return


def step_by_model(steps: Sequence[Step]) -> dict[str, Step]:
    return {step.model.__name__: step for step in steps}
