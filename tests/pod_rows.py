"""Thousands of pod rows at once, as the inventory would have written them (tests and bench/ui_bench.py).

Written with SQLAlchemy Core on the models' own tables (one INSERT of many
rows a table, as model/bootstrap.py does), not through a cluster: the web
UI's tests and bench measure listing, search and paging, not the inventory.
Bare pods each get their own slice (controller kind ``Pod``), as
inventory/records.py's SliceRef.bare makes them; the others share one
Deployment's slice.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from kuberaven.model import Database, Image, KubernetesService, KubernetesServiceInstance, Site, Slice, TrustDomain
from kuberaven.model.base import STATUS_OK, SyncCode, table_of, utcnow

CLUSTER = "kubernetes"  # model/bootstrap.py's default cluster
BARE_POD = "Pod"
CHUNK = 500  # rows an INSERT (SQLite's bound on parameters)


def pod_name(i: int) -> str:
    return f"pod-{i:05d}"


def add_pods(database: Database, namespace: str, count: int, *, bare: bool, first: int = 0) -> None:
    """``count`` Running pods ``pod-NNNNN`` (from ``first``) in ``namespace`` of the default cluster, each bare
    (its own slice) or all of one Deployment's slice ``web``."""
    now = utcnow()
    done: dict[str, Any] = {
        "backend_status": STATUS_OK,
        "backend_code": SyncCode.OK,
        "enacted": now,
        "xos_managed": False,
    }
    with database.engine.begin() as connection:
        cluster = connection.scalar(sa.select(KubernetesService.id).where(KubernetesService.name == CLUSTER))
        site = connection.scalar(sa.select(Site.id).limit(1))
        domain = _one(connection, TrustDomain, {"name": namespace, "owner_id": cluster, **done})
        image = _one(connection, Image, {"name": "registry.local/web", "tag": "1.0"})
        names = [pod_name(i) for i in range(first, first + count)]
        kind = BARE_POD if bare else "Deployment"
        slice_rows = [
            {"name": name, "site_id": site, "trust_domain_id": domain, "controller_kind": kind, **done}
            for name in (names if bare else ["web"])
        ]
        _insert(connection, Slice, slice_rows)
        query = sa.select(table_of(Slice).c.name, table_of(Slice).c.id).where(
            table_of(Slice).c.trust_domain_id == domain
        )
        slices = {name: id_ for name, id_ in connection.execute(query)}
        pods = [
            {
                "leaf_model_name": "KubernetesServiceInstance",
                "name": name,
                "owner_id": cluster,
                "trust_domain_id": domain,
                "slice_id": slices[name if bare else "web"],
                "image_id": image,
                "phase": "Running",
                "pod_ip": f"10.{(first + i) // 65536 % 256}.{(first + i) // 256 % 256}.{(first + i) % 256}",
                "node": f"node-{(first + i) % 20:02d}",
                "restart_count": 0,
                **done,
            }
            for i, name in enumerate(names)
        ]
        _insert(connection, KubernetesServiceInstance, pods)


def _one(connection: sa.Connection, model: type, row: dict[str, Any]) -> int:
    """The id of the row with these values, inserting it if there is none."""
    keys = {k: v for k, v in row.items() if k in ("name", "owner_id", "tag")}
    table = table_of(model)
    found = connection.scalar(sa.select(table.c.id).where(*(table.c[k] == v for k, v in keys.items())))
    if found is not None:
        return int(found)
    inserted = connection.execute(sa.insert(table).values(**row)).inserted_primary_key
    assert inserted is not None
    return int(inserted[0])


def _insert(connection: sa.Connection, model: type, rows: list[dict[str, Any]]) -> None:
    table = table_of(model)
    for start in range(0, len(rows), CHUNK):
        connection.execute(sa.insert(table), rows[start : start + CHUNK])
