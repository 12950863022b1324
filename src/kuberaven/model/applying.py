"""Applying documents (model/): ``kuberaven apply -f``, ``POST /api/v1/apply`` and plugins' seed files.

    located documents (documents.py: parse_documents)
        ──► in dependency order (dependency_order): a document after those of the kinds it may refer
            to, whatever the file's order; file order otherwise; results reported in file order
        ──► chunks of CHUNK, each in a savepoint: rows made or updated (documents.py: apply_document),
            flushed once per chunk, references looked up once per apply
        ──► a chunk the database refuses (IntegrityError) is applied again one document at a time,
            flushing each, so that the error names the document's line

Flushing once per chunk rather than once per document is what makes a
10,000-document file quick: the rows a chunk creates are found by natural key
(documents.py's PENDING index) before they reach the database.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .base import Model, integrity_error, row_name
from .checks import NUL
from .cluster import Image
from .documents import (
    EXISTING,
    PENDING,
    RESOLVED,
    _natural_key,
    apply_document,
    model_for,
    qualified_name,
)
from .errors import ModelError
from .parsing import DocumentError, Located

CHUNK = 500


def apply_documents(session: Session, documents: list[Located], source: str = "<input>") -> list[tuple[str, Model]]:
    """Create or update every document's row in ``session``'s transaction; the caller commits.

    Returns (action, row) pairs; raises DocumentError naming the line on the first problem.
    """
    order = dependency_order([_model_of(located) for located in documents])
    ordered = [documents[i] for i in order]
    results: list[tuple[str, Model]] = []
    session.info[RESOLVED] = {}
    lines: dict[int, int] = {}  # id(row) → the line of the document that gave it
    _begin(session)
    try:
        for start in range(0, len(ordered), CHUNK):
            results += _apply_chunk(session, ordered[start : start + CHUNK], source, lines)
    finally:
        session.info.pop(RESOLVED, None)
        session.info.pop(PENDING, None)
    return [result for _, result in sorted(zip(order, results, strict=True), key=lambda pair: pair[0])]


def _model_of(located: Located) -> type[Model] | None:
    kind = located.document.get("kind")
    try:
        return model_for(kind) if isinstance(kind, str) else None
    except ModelError:
        return None  # said with its line when the document is applied


@cache
def _refers_to(model: type[Model]) -> tuple[type[Model], ...]:
    """The models ``model``'s references point at (a reference to Service may name any kind of Service)."""
    return tuple(r.mapper.class_ for r in sa.inspect(model).relationships if not r.uselist)


def dependency_order(models: Sequence[type[Model] | None]) -> list[int]:
    """Indexes of documents (given by model; None: unknown kind) in an order that applies each after the
    documents of every kind it may refer to, otherwise in file order. Kinds that refer to each other
    (Service and TrustDomain) keep their file order.

    Kahn's algorithm over kinds, O(documents × kinds): the next document is the earliest one whose
    kind refers to no kind with documents still waiting; if there is none (a cycle), the earliest.
    """
    waiting: dict[type[Model] | None, list[int]] = defaultdict(list)
    for index, model in enumerate(models):
        waiting[model].append(index)
    for queue in waiting.values():
        queue.reverse()  # pop() takes the earliest
    needs = {
        m: {o for o in waiting if o is not None and o is not m and issubclass(o, _refers_to(m))}
        for m in waiting
        if m is not None
    }
    order: list[int] = []
    while waiting:
        ready = [m for m in waiting if m is None or not needs[m] & waiting.keys()] or list(waiting)
        model = min(ready, key=lambda m: waiting[m][-1])
        order.append(waiting[model].pop())
        if not waiting[model]:
            del waiting[model]
    return order


def _begin(session: Session) -> None:
    """Make the session's transaction real before the chunks' savepoints.

    pysqlite (Python's sqlite3 before 3.12) opens a transaction only before a write; a SAVEPOINT
    outside one starts its own, and releasing it commits — chunk 1 would stay when chunk 2 is refused.
    A write that changes nothing makes pysqlite open the transaction first.
    """
    if session.get_bind().dialect.name == "sqlite":
        session.execute(sa.text("UPDATE site SET id = id WHERE 0 = 1"))


def _refuse_repeats(
    documents: list[Located], results: list[tuple[str, Model]], source: str, lines: dict[int, int]
) -> None:
    """Each object once per file: a second document for it would be merged into the first silently.

    Checked before a chunk's savepoint is released."""
    for located, (_, row) in zip(documents, results, strict=True):
        if id(row) in lines:
            raise DocumentError(
                source,
                located.line,
                f"{type(row).__name__} {qualified_name(row)!r} is also "
                f"given at line {lines[id(row)]}: give each object once",
            )
        lines[id(row)] = located.line


def _apply_chunk(session: Session, chunk: list[Located], source: str, lines: dict[int, int]) -> list[tuple[str, Model]]:
    savepoint = session.begin_nested()
    session.info[PENDING] = {}
    session.info[EXISTING] = _existing_rows(session, chunk)
    try:
        with session.no_autoflush:
            applied = [_apply(session, located, source) for located in chunk]
        _refuse_repeats(chunk, applied, source, lines)
        session.flush()
    except IntegrityError:
        savepoint.rollback()
        session.info[RESOLVED] = {}  # it may hold rows of the chunk just rolled back
        session.info.pop(PENDING, None)
        session.info.pop(EXISTING, None)
        flushed = [_apply_flushing(session, located, source) for located in chunk]
        _refuse_repeats(chunk, flushed, source, lines)
        return flushed
    except BaseException:
        savepoint.rollback()
        raise
    finally:
        session.info.pop(EXISTING, None)
    savepoint.commit()
    return applied


def _existing_rows(session: Session, chunk: list[Located]) -> dict[type[Model], tuple[set[str], dict[Any, Model]]]:
    """The stored rows the chunk's documents name, one query per kind (instead of one per document)."""
    names: dict[type[Model], set[str]] = defaultdict(set)
    for located in chunk:
        kind, name = located.document.get("kind"), located.document.get("name")
        try:
            model = model_for(kind) if isinstance(kind, str) else None
        except ModelError:
            continue  # said with its line when the document is applied
        # Only kinds named by a plain name column (an Image's name is parsed into name, tag and digest); a name
        # holding a NUL is refused with its line when its document is applied.
        if model is None or model is Image or model.natural_key[-1] != "name" or not isinstance(name, str):
            continue
        if NUL not in name:
            names[model].add(name)
    found: dict[type[Model], tuple[set[str], dict[Any, Model]]] = {}
    for model, wanted in names.items():
        rows = session.scalars(sa.select(model).where(model.name.in_(wanted)))  # type: ignore[attr-defined]
        fields = model.natural_key
        found[model] = (wanted, {_natural_key(model, {f: getattr(row, f) for f in fields}): row for row in rows})
    return found


def _apply(session: Session, located: Located, source: str) -> tuple[str, Model]:
    try:
        return apply_document(session, dict(located.document))
    except (ModelError, ValueError) as error:
        raise DocumentError(source, located.line, str(error)) from None


def _apply_flushing(session: Session, located: Located, source: str) -> tuple[str, Model]:
    """One document, flushed: the database's refusal is this document's (and names its line)."""
    with session.no_autoflush:
        action, row = _apply(session, located, source)
    name = row_name(row)
    try:
        session.flush()
    except IntegrityError as error:
        raise DocumentError(source, located.line, str(integrity_error(row, error, name))) from None
    return action, row
