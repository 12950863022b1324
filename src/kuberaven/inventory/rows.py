"""How the inventory writes a row it found (inventory/): what writer.py, pods.py, implied.py and objects.py share.

    a found object ──► its row with external_bookkeeping() (in step with Kubernetes, not kuberaven's)
    many new rows  ──► insert_many() / insert_shared() (one executemany of found_insert(); ids read back by
                       their unique key)

Core statements on a Connection, not ORM objects: this is the hot path. In an
executemany SQLAlchemy converts every parameter of every row (a datetime to
text, a bool to an int, a dict to JSON), which was most of a cold start's
writes beside a bare executemany of the same rows: so the statements the
batches repeat carry their constants in the SQL, the batch's one timestamp as
one parameter, and JSON encoded by msgspec (json_value()) rather than by the
json module per value.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import TYPE_CHECKING, Any

import msgspec
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..model.base import STATUS_OK, SyncCode, UTCDateTime, table_of, utcnow
from ..model.cluster import TrustDomain
from ..model.workloads import ServiceInstance

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

KSI = "KubernetesServiceInstance"  # a pod's leaf_model_name
SI = table_of(ServiceInstance)
TD = table_of(TrustDomain)
PREFETCH_CHUNK = 400  # names per IN (…), well below SQLite's bound on parameters
RECREATE = "{kind} deleted in Kubernetes; kuberaven will re-create it"
IN_STEP = {"backend_status": STATUS_OK, "backend_code": SyncCode.OK}  # what a row whose object was seen as it is says


NOW = "bookkept"  # found_insert()'s one parameter for a batch's timestamps: each row of it carries the batch's now
_TIMESTAMPS = ("created", "updated", "enacted")
_FLAGS = ("xos_managed", "deleted", "backend_need_delete", "no_sync", "no_policy")  # all false on a found row


def external_bookkeeping(now: Any, handle: str | None) -> dict[str, Any]:
    """A row the inventory found: in step with Kubernetes from the start, not managed by kuberaven."""
    return {
        **dict.fromkeys(_TIMESTAMPS, now),
        **IN_STEP,
        "backend_handle": handle,
        "policy_code": SyncCode.NEW,
        **dict.fromkeys(_FLAGS, False),
    }


def _insert(dialect: str) -> Any:
    """The database's INSERT … ON CONFLICT, its dialect imported only for the database in use: the PostgreSQL
    dialect is about 2 MiB and 40-65 ms of a start that a SQLite daemon never needs."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    from sqlalchemy.dialects import sqlite

    return sqlite.insert


@functools.cache
def found_insert(
    table: sa.Table, dialect: str, json_columns: tuple[str, ...] = ()
) -> postgresql.Insert | sqlite.Insert:
    """The INSERT of rows the inventory found, built once per table: external_bookkeeping() in the SQL.

    Each row of the executemany carries its own values, its ``json_columns``
    encoded by json_value(), and ``NOW`` (the batch's timestamp, one parameter
    for the three columns); the constants are part of the statement, so
    SQLAlchemy converts none of them row by row.
    """
    # SQLite's parameters are positional: the one NOW would be converted once per column it fills, so it
    # comes as the text UTCDateTime stores (stamp()); PostgreSQL's named parameter is converted once a row.
    now = sa.bindparam(NOW, type_=UTCDateTime() if dialect == "postgresql" else sa.String())
    constants: dict[str, Any] = {
        **dict.fromkeys(_TIMESTAMPS, now),
        **{column: sa.bindparam(f"_{column}", value) for column, value in IN_STEP.items()},
        "policy_code": sa.bindparam("_policy_code", SyncCode.NEW),
        **dict.fromkeys(_FLAGS, sa.false()),
    }
    insert = _insert(dialect)(table)
    return insert.values({**constants, **{column: json_value(dialect, column) for column in json_columns}})


def stamp(db: Connection, now: dt.datetime) -> Any:
    """The batch's timestamp as found_insert()'s ``NOW`` parameter (each of its rows carries it)."""
    if db.dialect.name == "postgresql":
        return now
    # The dialect's own DateTime under the decorator (SQLite's DATETIME, which makes the text), as a column's is.
    convert = UTCDateTime().dialect_impl(db.dialect).bind_processor(db.dialect)
    assert convert is not None, "SQLite stores a DateTime as text"
    return convert(now)


def json_value(dialect: str, column: str) -> sa.ColumnElement[Any]:
    """A JSON column's value given as text already encoded (by encode_json()), under the key ``{column}_json``.

    SQLAlchemy's JSON type calls the json module per value, per row; msgspec is several times faster.
    PostgreSQL takes the text cast to JSON; SQLite stores JSON as text anyway.
    """
    bind = sa.bindparam(f"{column}_json", type_=sa.Text())
    return sa.cast(bind, sa.JSON) if dialect == "postgresql" else bind


_encoder = msgspec.json.Encoder()


def encode_json(value: Any) -> str:
    return _encoder.encode(value).decode()


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
    insert = _insert(db.dialect.name)(table)
    row = {**key, **extra, **external_bookkeeping(utcnow(), None)}
    statement = insert.values(row).on_conflict_do_nothing(index_elements=list(key)).returning(table.c.id)
    inserted = db.execute(statement).scalar()
    if inserted is not None:
        return inserted
    found = _id_of(db, table, key)  # inserted meanwhile by another transaction, committed now (ON CONFLICT waited)
    assert found is not None, f"{table.name} {key}: neither inserted nor found"
    return found


def insert_shared(db: Connection, table: sa.Table, rows: list[dict[str, Any]], key: tuple[str, ...]) -> None:
    """Insert found ``rows`` (each with ``NOW``) with one executemany, skipping those whose unique ``key``
    another transaction inserted first (ON CONFLICT DO NOTHING): rows several writers at once may add, such
    as Images."""
    db.execute(found_insert(table, db.dialect.name).on_conflict_do_nothing(index_elements=list(key)), rows)


def insert_many(
    db: Connection,
    table: sa.Table,
    rows: list[dict[str, Any]],
    key: tuple[str, str],
    *criteria: sa.ColumnElement[bool],
    json_columns: tuple[str, ...] = (),
) -> dict[tuple[Any, Any], int]:
    """Insert found ``rows`` (each with ``NOW``, its ``json_columns`` encoded) and return their ids by their
    unique ``key`` (two columns).

    One executemany and one SELECT per few hundred rows: on SQLite, INSERT … RETURNING with the
    rows' order kept runs one statement per row, which was most of a cold start's time.
    """
    db.execute(found_insert(table, db.dialect.name, json_columns), rows)
    first, second = key
    query = _ids_by_key(table, first, second, *criteria)
    ids: dict[tuple[Any, Any], int] = {}
    for start in range(0, len(rows), PREFETCH_CHUNK):
        chunk = rows[start : start + PREFETCH_CHUNK]
        firsts, seconds = sorted({r[first] for r in chunk}), sorted({r[second] for r in chunk})
        ids.update(((a, b), row_id) for row_id, a, b in db.execute(query, {"firsts": firsts, "seconds": seconds}))
    return ids


def _ids_by_key(table: sa.Table, first: str, second: str, *criteria: sa.ColumnElement[bool]) -> sa.Select[Any]:
    # Expanding parameters given at execution: building IN (…) from a list coerces every value, per call.
    return sa.select(table.c.id, table.c[first], table.c[second]).where(
        table.c[first].in_(sa.bindparam("firsts", expanding=True)),
        table.c[second].in_(sa.bindparam("seconds", expanding=True)),
        *criteria,
    )
