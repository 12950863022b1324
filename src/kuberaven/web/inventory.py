"""The inventory as the web UI lists it (web/): pods and namespaces, paged, searched and sorted in SQL.

    GET /api/v1/inventory/pods?cluster=C&namespace=NS&q=TEXT&sort=[-]COLUMN&limit&offset
        ──► one SELECT of pods joined to their namespace, cluster, slice and image ──► a page of flat rows
    GET /api/v1/inventory/namespaces?cluster=C&q=TEXT&limit&offset
        ──► a page of namespaces, with their pods, bare pods and slices counted by one GROUP BY each

A pod row names its slice only when a controller made it: a bare pod's own
slice (one per pod, named after it) is ``null`` and ``bare`` is true, so a
namespace of 3,000 bare pods is one list, not 3,000 slices. The model API
(api.py) stays the place for whole documents, details and changes.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session, aliased

from ..model import Database, Image, KubernetesServiceInstance, Service, Slice, TrustDomain
from .api import MAX_LIMIT
from .listing import contains, order

# The controller kind of a bare pod's own slice (what the inventory writes: inventory/records.py BARE_POD).
BARE_POD = "Pod"
DEFAULT_LIMIT = 50

Pod = KubernetesServiceInstance
Cluster = aliased(Service, flat=True)
POD_COLUMNS: dict[str, Any] = {
    "name": Pod.name,
    "namespace": TrustDomain.name,
    "cluster": Cluster.name,
    "slice": Slice.name,
    "phase": Pod.phase,
    "ip": Pod.pod_ip,
    "node": Pod.node,
    "restarts": Pod.restart_count,
    "image": Image.name,
    "status": Pod.backend_status,
    "managed": Pod.xos_managed,
}
# Searched on the pod's own row; the namespace, slice and image by their (few) ids matching the text, so a
# search reads one table, not four joined (bench/ui_bench.py).
SEARCHED = (Pod.name, Pod.pod_ip, Pod.node, Pod.phase)


def inventory_router(database: Database) -> APIRouter:
    router = APIRouter(prefix="/api/v1/inventory", tags=["inventory"])

    @router.get("/pods")
    async def pods(
        cluster: str | None = Query(None, description="only this cluster"),
        namespace: str | None = Query(None, description="only this namespace"),
        q: str | None = Query(None, description="a part of the name, namespace, slice, IP, node, image or phase"),
        sort: str = Query("namespace", description=f"[-]column: {', '.join(POD_COLUMNS)}"),
        limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description=f"rows a page, 1–{MAX_LIMIT}"),
        offset: int = Query(0, ge=0, le=10**18, description="rows to skip"),
    ) -> dict[str, Any]:
        """The pods, one flat list whatever their slices: a bare pod's ``slice`` is null and ``bare`` true."""
        searched = _search(q)
        criteria = _place(cluster, namespace) + searched
        ordering = order(POD_COLUMNS, sort, "namespace", Pod.id)
        if sort.lstrip("-") == "namespace":  # then by name within each namespace
            ordering.insert(1, Pod.name.desc() if sort.startswith("-") else Pod.name.asc())
        page = _searched_page if searched else _page
        total, items = await run_in_threadpool(page, database, criteria, ordering, limit, offset)
        return {"total": total, "limit": limit, "offset": offset, "items": items}

    @router.get("/namespaces")
    async def namespaces(
        cluster: str | None = Query(None, description="only this cluster"),
        q: str | None = Query(None, description="a part of the namespace's name"),
        limit: int = Query(MAX_LIMIT, ge=1, le=MAX_LIMIT, description=f"rows a page, 1–{MAX_LIMIT}"),
        offset: int = Query(0, ge=0, le=10**18, description="rows to skip"),
    ) -> dict[str, Any]:
        """The namespaces by cluster and name, each with its pods, bare pods and (controllers') slices counted."""
        criteria = _namespace_place(cluster) + contains([TrustDomain.name], q)
        total, items = await run_in_threadpool(_namespaces, database, criteria, limit, offset)
        return {"total": total, "limit": limit, "offset": offset, "items": items}

    return router


def _namespace_place(cluster: str | None) -> list[Any]:
    return [] if cluster is None else [Cluster.name == cluster]


def _place(cluster: str | None, namespace: str | None) -> list[Any]:
    """Pods of this cluster and namespace, by their namespaces' ids (the pods' own table only)."""
    if cluster is None and namespace is None:
        return []
    criteria = _namespace_place(cluster) + ([] if namespace is None else [TrustDomain.name == namespace])
    domains = sa.select(TrustDomain.id).join(Cluster, Cluster.id == TrustDomain.owner_id).where(*criteria)
    return [Pod.trust_domain_id.in_(domains)]


def _search(q: str | None) -> list[Any]:
    """Pods whose name, IP, node or phase, or whose namespace, controller's slice or image holds ``q``."""
    own = contains(SEARCHED, q)
    if not own:
        return []
    domains = sa.select(TrustDomain.id).where(*contains([TrustDomain.name], q))
    controllers = sa.func.coalesce(Slice.controller_kind, "") != BARE_POD  # a bare pod's slice: its own name
    slices = sa.select(Slice.id).where(controllers, *contains([Slice.name], q))
    images = sa.select(Image.id).where(*contains([Image.name], q))
    related = [Pod.trust_domain_id.in_(domains), Pod.slice_id.in_(slices), Pod.image_id.in_(images)]
    return [sa.or_(*own, *related)]


def _pod_count(criteria: list[Any]) -> sa.Select[Any]:
    return sa.select(sa.func.count()).select_from(Pod).where(Pod.leaf_model_name == Pod.__name__, *criteria)


def _pod_query(columns: list[Any]) -> sa.Select[Any]:
    return (
        sa.select(*columns)
        .select_from(Pod)
        .join(TrustDomain, TrustDomain.id == Pod.trust_domain_id)
        .join(Cluster, Cluster.id == TrustDomain.owner_id)
        .outerjoin(Slice, Slice.id == Pod.slice_id)
        .outerjoin(Image, Image.id == Pod.image_id)
        .where(Pod.leaf_model_name == Pod.__name__)
    )


SHOWN = [
    Pod.id,
    Pod.name,
    TrustDomain.name.label("namespace"),
    Cluster.name.label("cluster"),
    Slice.name.label("slice"),
    Slice.controller_kind,
    Pod.phase,
    Pod.pod_ip,
    Pod.node,
    Pod.restart_count,
    Image.name.label("image"),
    Image.tag,
    Pod.xos_managed,
    Pod.backend_status,
    Pod.backend_code,
]


def _page(
    database: Database, criteria: list[Any], ordering: list[Any], limit: int, offset: int
) -> tuple[int, list[dict[str, Any]]]:
    """A page of pods and how many match, counted on the pods' own table (its index: no joins)."""
    with database.session() as session:
        total = session.scalar(_pod_count(criteria)) or 0
        rows = session.execute(_pod_query(SHOWN).where(*criteria).order_by(*ordering).limit(limit).offset(offset))
        return total, [_pod_row(row._mapping) for row in rows]


def _searched_page(
    database: Database, criteria: list[Any], ordering: list[Any], limit: int, offset: int
) -> tuple[int, list[dict[str, Any]]]:
    """As _page, the total counted in the page's own scan (a window count): a search reads the table once."""
    query = _pod_query([*SHOWN, sa.func.count().over().label("total")]).where(*criteria).order_by(*ordering)
    with database.session() as session:
        rows = [r._mapping for r in session.execute(query.limit(limit).offset(offset))]
        if rows:
            return int(rows[0]["total"]), [_pod_row(row) for row in rows]
        return (session.scalar(_pod_count(criteria)) or 0) if offset else 0, []  # past the end: count them


def _pod_row(row: Any) -> dict[str, Any]:
    bare = row["controller_kind"] == BARE_POD
    image = row["image"] and (f"{row['image']}:{row['tag']}" if row["tag"] else row["image"])
    return {
        "id": row["id"],
        "cluster": row["cluster"],
        "namespace": row["namespace"],
        "trust_domain": f"{row['cluster']}/{row['namespace']}",
        "name": row["name"],
        "slice": None if bare else row["slice"],
        "bare": bare,
        "phase": row["phase"],
        "pod_ip": row["pod_ip"],
        "node": row["node"],
        "restart_count": row["restart_count"],
        "image": image,
        "xos_managed": row["xos_managed"],
        "backend_status": row["backend_status"],
        "backend_code": row["backend_code"],
    }


def _namespaces(database: Database, criteria: list[Any], limit: int, offset: int) -> tuple[int, list[dict[str, Any]]]:
    base = sa.select().select_from(TrustDomain).join(Cluster, Cluster.id == TrustDomain.owner_id).where(*criteria)
    shown = [TrustDomain.id, TrustDomain.name, Cluster.name.label("cluster"), TrustDomain.xos_managed]
    shown += [TrustDomain.backend_status, TrustDomain.backend_code]
    with database.session() as session:
        total = session.scalar(base.add_columns(sa.func.count())) or 0
        page = base.add_columns(*shown).order_by(Cluster.name, TrustDomain.name, TrustDomain.id)
        rows = [dict(r._mapping) for r in session.execute(page.limit(limit).offset(offset))]
        ids = [r["id"] for r in rows]
        pods, bare, slices = _counts(session, ids) if ids else ({}, {}, {})
    return total, [
        {**r, "pods": pods.get(r["id"], 0), "bare_pods": bare.get(r["id"], 0), "slices": slices.get(r["id"], 0)}
        for r in rows
    ]


def _counts(session: Session, ids: list[int]) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """Pods, bare pods and controllers' slices of these namespaces (a page: at most MAX_LIMIT ids)."""
    is_bare = sa.func.coalesce(Slice.controller_kind, "") == BARE_POD
    by_namespace = (
        sa.select(Pod.trust_domain_id, is_bare, sa.func.count())
        .outerjoin(Slice, Slice.id == Pod.slice_id)
        .where(Pod.leaf_model_name == Pod.__name__, Pod.trust_domain_id.in_(ids))
        .group_by(Pod.trust_domain_id, is_bare)
    )
    pods: dict[int, int] = {}
    bare: dict[int, int] = {}
    for namespace, bare_pods, count in session.execute(by_namespace):
        key = int(namespace or 0)  # never null: the query asks for these ids
        pods[key] = pods.get(key, 0) + count
        if bare_pods:
            bare[key] = count
    controllers = (
        sa.select(Slice.trust_domain_id, sa.func.count())
        .where(Slice.trust_domain_id.in_(ids), sa.func.coalesce(Slice.controller_kind, "") != BARE_POD)
        .group_by(Slice.trust_domain_id)
    )
    return pods, bare, {namespace: count for namespace, count in session.execute(controllers)}
