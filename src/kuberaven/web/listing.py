"""Search and sort of the REST API's lists (web/): ``?q=TEXT`` and ``?sort=[-]COLUMN``, as SQL.

    ?q=web      ──► contains(columns, "web")   a case-insensitive substring of any of the columns
    ?sort=-node ──► order(columns, "-node")    ORDER BY node DESC, then the tie-breaker (one order a page)

Both end up in the one SELECT of a page (LIMIT/OFFSET), so a search of 30,000
rows is answered by the database, never by loading them all
(bench/ui_bench.py measures it). A bad column is a 422 naming the ones there are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler

from ..model.errors import ValidationError

MAX_QUERY = 200  # characters of a search: longer is no use to a person and only slows LIKE
ESCAPE = "\\"


def contains(columns: Sequence[Any], text: str | None) -> list[Any]:
    """Criteria (empty or one) matching rows where any column holds ``text``, case-insensitively; ``%`` and
    ``_`` are literal."""
    text = (text or "").strip()
    if not text:
        return []
    if len(text) > MAX_QUERY:
        raise ValidationError("query", "q", f"at most {MAX_QUERY} characters, not {len(text)}")
    pattern = "%" + text.replace(ESCAPE, ESCAPE * 2).replace("%", r"\%").replace("_", r"\_") + "%"
    return [sa.or_(*(CaseFreeLike(column, pattern) for column in columns))]


class CaseFreeLike(sa.sql.expression.ColumnElement[bool]):
    """``column`` matches the LIKE ``pattern`` whatever the case: ILIKE on PostgreSQL, LIKE on SQLite (which
    ignores ASCII case already; SQLAlchemy's ilike() would call lower() on every row there, many times slower)."""

    inherit_cache = False
    type = sa.Boolean()

    def __init__(self, column: Any, pattern: str) -> None:
        self.column = column
        self.pattern = pattern


@compiles(CaseFreeLike)
def _ilike(element: CaseFreeLike, compiler: SQLCompiler, **kw: Any) -> str:
    return str(compiler.process(element.column.ilike(element.pattern, escape=ESCAPE), **kw))


@compiles(CaseFreeLike, "sqlite")
def _like(element: CaseFreeLike, compiler: SQLCompiler, **kw: Any) -> str:
    return str(compiler.process(element.column.like(element.pattern, escape=ESCAPE), **kw))


def order(columns: Mapping[str, Any], sort: str | None, default: str, tie: Any) -> list[Any]:
    """ORDER BY of ``sort`` (a key of ``columns``; a leading ``-``: descending), then ``tie`` (unique), so
    that pages neither repeat nor skip rows."""
    wanted = (sort or default).strip()
    descending = wanted.startswith("-")
    name = wanted.removeprefix("-")
    if name not in columns:
        raise ValidationError("query", "sort", f"no column {name[:40]!r} (use {', '.join(sorted(columns))})")
    column = columns[name]
    return [column.desc() if descending else column.asc(), tie.desc() if descending else tie.asc()]
