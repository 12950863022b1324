"""The rules every row a user saves must pass (model/), whichever path saves it.

    Python (row.save()), apply -f, REST, a model policy ──► check_row(session, row)
        ──► check_fields: Python types, integer bounds, string lengths, NUL characters (SQLite checks none)
        ──► check_observed_untouched: fields the inventory observes are not the user's
        ──► check_no_cycle: name references that lead back to the row
        ──► the model's own validate()

Rows are taken by what they have (their table, natural_key, observed_fields,
validate): base.py's Model, which calls these, sits above this module.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase

from .errors import ValidationError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


MAX_TEXT = 1024 * 1024  # a Text field larger than this is refused
# No text PostgreSQL stores, in a column or in JSON, may hold a NUL (psycopg refuses it mid-statement, a 500 to
# a REST client); SQLite would store it. So text with one is refused on both, before any query uses it.
NUL = "\x00"
HOLDS_NUL = "contains a NUL character (\\x00), which no stored text may hold"
# Bits of each integer type on PostgreSQL (SQLite's hold 64): a larger value would fail in the driver.
INTEGER_BITS = {sa.SmallInteger: 16, sa.BigInteger: 64, sa.Integer: 32}


def integer_bounds(column_type: sa.types.TypeEngine[Any]) -> tuple[int, int]:
    """The smallest and largest value an integer column holds on every database kuberaven runs on."""
    bits = next((b for t, b in INTEGER_BITS.items() if isinstance(column_type, t)), 64)
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def check_fields(row: DeclarativeBase) -> None:
    """Types and sizes the database itself would not check (SQLite checks neither)."""
    model = type(row).__name__
    for key, python_type, length, bounds in _field_rules(type(row)):
        value = getattr(row, key, None)
        if value is None:
            continue
        if python_type is not None and not _is_instance(value, python_type):
            raise ValidationError(model, key, f"must be {python_type.__name__}, not {type(value).__name__} ({value!r})")
        if python_type is int and not bounds[0] <= value <= bounds[1]:
            raise ValidationError(model, key, f"must be between {bounds[0]} and {bounds[1]}, not {value}")
        limit = length or (MAX_TEXT if isinstance(value, str) else None)
        if isinstance(value, str) and limit and len(value) > limit:
            raise ValidationError(model, key, f"is {len(value)} characters long; at most {limit} are allowed")
        if holds_nul(value):
            raise ValidationError(model, key, HOLDS_NUL)


def holds_nul(value: Any) -> bool:
    """Whether a value, or any key or item within it (a JSON field's), is text holding a NUL."""
    stack = [value]
    while stack:  # iterative: a deep JSON document must not exhaust the Python stack
        item = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


@functools.cache
def _field_rules(model: type[DeclarativeBase]) -> tuple[tuple[str, type | None, int | None, tuple[int, int]], ...]:
    """(field, Python type, length, integer bounds) of each column, worked out once per model (apply checks
    thousands of rows)."""
    return tuple(
        (column.key, _python_type(column.type), getattr(column.type, "length", None), integer_bounds(column.type))
        for column in model.__table__.columns
    )


def check_row(session: Session, row: Any) -> None:
    """Every rule a row a user (Python API, apply, REST, a model policy) saves must pass; nothing is stored."""
    check_fields(row)
    check_observed_untouched(row)
    check_no_cycle(row)
    row.validate(session)


def check_observed_untouched(row: Any) -> None:
    """Refuse a user's write to a field the inventory observes (it would be overwritten, and it is not theirs)."""
    state = sa.inspect(row)
    for field in sorted(row.observed_fields):
        history = state.attrs[field].history
        if not history.added:
            continue
        before = history.deleted[0] if history.deleted else None
        if history.added[0] != before:
            raise ValidationError(
                type(row).__name__, field, "is observed from Kubernetes by the inventory and cannot be written"
            )


def check_no_cycle(row: Any) -> None:
    """Refuse a row whose name references lead back to itself (qualified names are built along them)."""

    def walk(path: list[Any], first: str | None) -> None:
        current = path[-1]
        for field in type(current).natural_key:
            target = getattr(current, field, None)
            if not isinstance(target, DeclarativeBase) or any(target is seen for seen in path[1:]):
                continue  # not a reference, or a cycle among other rows: theirs, found when one is saved
            if target is row:
                chain = " → ".join(f"{type(r).__name__} {getattr(r, 'name', r.id)!r}" for r in (*path, row))
                raise ValidationError(type(row).__name__, first or field, f"its references make a cycle: {chain}")
            walk([*path, target], first or field)

    walk([row], None)


def _python_type(column_type: sa.types.TypeEngine[Any]) -> type | None:
    try:
        return column_type.python_type
    except NotImplementedError:
        return None


def _is_instance(value: Any, python_type: type) -> bool:
    if python_type is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if python_type is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if python_type is dt.datetime:
        return isinstance(value, dt.datetime)
    return isinstance(value, python_type)
