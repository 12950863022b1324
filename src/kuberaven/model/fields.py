"""What the table modules share (model/): the foreign-key shorthand, partial indexes and validate()'s checks.

    names.py (pure: what is wrong with a name) ──► check_name / check_plain_name ──► ValidationError
    cluster.py, workloads.py, journal.py (columns and validate()) ◄── fk, partial_index, require
    schema.py (a fresh database's DDL) ◄── with_predicate

A check raises a ValidationError naming the row's model and field, the one
message the Python API, ``kuberaven apply`` and the REST API all show.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa

from .base import Model
from .errors import ValidationError
from .names import dns_name_problem, plain_name_problem


def fk(target: str, ondelete: str = "CASCADE", **kw: Any) -> sa.ForeignKey:
    return sa.ForeignKey(target, ondelete=ondelete, **kw)


# A partial index's predicate, kept in the Index's info rather than as ``sqlite_where=``/``postgresql_where=``:
# a dialect option loads its dialect when the model class is declared, so every process paid for the
# PostgreSQL dialect (about 2 MiB and 40-65 ms of CPU) even on SQLite. with_predicate() attaches it for the one
# dialect that makes the index; the migrations state it as they always did (0001's op.create_index).
PARTIAL_WHERE = "kuberaven_partial_where"
PARTIAL_DIALECTS = frozenset({"sqlite", "postgresql"})  # the databases kuberaven runs on, both with partial indexes


def partial_index(name: str, *columns: str, where: str, unique: bool = False) -> sa.Index:
    """An index over the rows matching ``where`` (SQL text valid on every supported database)."""
    return sa.Index(name, *columns, unique=unique, info={PARTIAL_WHERE: where})


def with_predicate(index: sa.Index, dialect: str) -> sa.Index:
    """``index`` with its partial predicate as ``dialect``'s option, ready for its CREATE INDEX (this loads
    the dialect: the one in use). A plain index is left as it is."""
    where = index.info.get(PARTIAL_WHERE)
    if where is None:
        return index
    if dialect not in PARTIAL_DIALECTS:
        # Without its predicate the index would be a full one: a unique index would refuse valid rows.
        raise ValueError(f"index {index.name}: partial indexes are made on {sorted(PARTIAL_DIALECTS)}, not {dialect!r}")
    index.dialect_options[dialect]["where"] = sa.text(where)
    return index


def check_name(row: Model, pattern: re.Pattern[str], limit: int, what: str) -> None:
    """A name that becomes a Kubernetes object's name."""
    problem = dns_name_problem(getattr(row, "name", None), pattern, limit, what)
    if problem:
        raise ValidationError(type(row).__name__, "name", problem)


def check_plain_name(row: Model, limit: int | None = None) -> None:
    """A name that never becomes a Kubernetes object's name (names.py)."""
    problem = plain_name_problem(getattr(row, "name", None), limit)
    if problem:
        raise ValidationError(type(row).__name__, "name", problem)


def require(row: Model, *fields: str) -> None:
    for field in fields:
        if getattr(row, field, None) is None and getattr(row, f"{field}_id", None) is None:
            raise ValidationError(type(row).__name__, field, "is required")
