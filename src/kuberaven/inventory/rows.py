"""How the inventory writes a row it found (inventory/): what writer.py, pods.py, implied.py and objects.py share.

    a found object ──► its row with external_bookkeeping() (in step with Kubernetes, not kuberaven's)
    many new rows  ──► insert_many() (one executemany, ids read back by their unique key)

Core statements on a Connection, not ORM objects: this is the hot path.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from ..model.base import STATUS_OK, Code, table_of, utcnow
from ..model.cluster import TrustDomain
from ..model.workloads import ServiceInstance

KSI = "KubernetesServiceInstance"  # a pod's leaf_model_name
SI = table_of(ServiceInstance)
TD = table_of(TrustDomain)
PREFETCH_CHUNK = 400  # names per IN (…), well below SQLite's bound on parameters
RECREATE = "{kind} deleted in Kubernetes; kuberaven will re-create it"
IN_STEP = {"backend_status": STATUS_OK, "backend_code": Code.OK}  # what a row whose object was seen as it is says


def external_bookkeeping(now: Any, handle: str | None) -> dict[str, Any]:
    """A row the inventory found: in step with Kubernetes from the start, not managed by kuberaven."""
    return {
        "created": now,
        "updated": now,
        "enacted": now,
        **IN_STEP,
        "backend_handle": handle,
        "xos_managed": False,
        "policy_code": Code.NEW,
        "deleted": False,
        "backend_need_delete": False,
        "no_sync": False,
        "no_policy": False,
    }


def find_or_insert(db: Connection, table: sa.Table, key: dict[str, Any], extra: dict[str, Any]) -> int:
    """The id of the row with ``key``, inserted (with ``extra``) as a found row if there is none."""
    found = _id_of(db, table, key)
    if found is not None:
        return found
    row = {**key, **extra, **external_bookkeeping(utcnow(), None)}
    return db.execute(sa.insert(table).values(row).returning(table.c.id)).scalar_one()


def _id_of(db: Connection, table: sa.Table, key: dict[str, Any]) -> int | None:
    return db.execute(sa.select(table.c.id).where(*[table.c[c] == v for c, v in key.items()])).scalar()


def find_or_insert_shared(db: Connection, table: sa.Table, key: dict[str, Any], extra: dict[str, Any]) -> int:
    """find_or_insert() for a row that several writers at once may add (an Image: every cluster's
    inventory, on every replica, finds the same ones): ``key`` is a unique constraint, and a row
    another transaction inserted first is taken instead of failing the batch."""
    found = _id_of(db, table, key)
    if found is not None:
        return found
    insert = (postgresql.insert if db.dialect.name == "postgresql" else sqlite.insert)(table)
    row = {**key, **extra, **external_bookkeeping(utcnow(), None)}
    statement = insert.values(row).on_conflict_do_nothing(index_elements=list(key)).returning(table.c.id)
    inserted = db.execute(statement).scalar()
    if inserted is not None:
        return inserted
    found = _id_of(db, table, key)  # inserted meanwhile by another transaction, committed now (ON CONFLICT waited)
    assert found is not None, f"{table.name} {key}: neither inserted nor found"
    return found


def insert_shared(db: Connection, table: sa.Table, rows: list[dict[str, Any]], key: tuple[str, ...]) -> None:
    """Insert ``rows`` with one executemany, skipping those whose unique ``key`` another transaction
    inserted first (ON CONFLICT DO NOTHING): rows several writers at once may add, such as Images."""
    insert = (postgresql.insert if db.dialect.name == "postgresql" else sqlite.insert)(table)
    db.execute(insert.on_conflict_do_nothing(index_elements=list(key)), rows)


def insert_many(
    db: Connection, table: sa.Table, rows: list[dict[str, Any]], key: tuple[str, str], *criteria: sa.ColumnElement[bool]
) -> dict[tuple[Any, Any], int]:
    """Insert ``rows`` and return their ids by their unique ``key`` (two columns).

    One executemany and one SELECT per few hundred rows: on SQLite, INSERT … RETURNING with the
    rows' order kept runs one statement per row, which was most of a cold start's time.
    """
    db.execute(sa.insert(table), rows)
    first, second = key
    ids: dict[tuple[Any, Any], int] = {}
    for start in range(0, len(rows), PREFETCH_CHUNK):
        chunk = rows[start : start + PREFETCH_CHUNK]
        firsts, seconds = sorted({r[first] for r in chunk}), sorted({r[second] for r in chunk})
        query = sa.select(table.c.id, table.c[first], table.c[second]).where(
            table.c[first].in_(firsts), table.c[second].in_(seconds), *criteria
        )
        ids.update(((a, b), row_id) for row_id, a, b in db.execute(query))
    return ids
