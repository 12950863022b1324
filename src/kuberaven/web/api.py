"""/api/v1/<kind>: CRUD of every model (web/), on the one code path of ``apply -f`` and Python.

Documents are the ones of model/documents.py: references by name, read-only
fields refused, secret values hidden. Every change is one transaction: an
error answers 4xx naming the problem and stores nothing.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Body, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from ..model import Database, Model
from ..model.applying import apply_documents
from ..model.asof import Snapshot, checked_time, document_filters, resolve_at
from ..model.base import table_of
from ..model.checks import HOLDS_NUL, NUL
from ..model.deletes import delete_reference
from ..model.documents import (
    as_reference,
    create_document,
    document_criteria,
    model_for,
    names_kind,
    resolve,
    to_document,
    update_document,
    user_models,
)
from ..model.errors import DoesNotExist, ModelError, ValidationError
from ..model.parsing import DocumentError, parse_documents
from ..model.versions import versions
from .errors import flush_or_raise
from .listing import contains, order

PAGING = {"limit", "offset", "access_token", "at", "q", "sort"}
MAX_LIMIT = 1000
BODY = "request body"  # the source apply's messages name
MAX_DOCUMENTS = 10_000  # a request's documents (the body is at most 1 MiB: guards.py)


def page_params(request: Request) -> tuple[int, int, dict[str, str]]:
    """limit, offset and the remaining query parameters (the field filters); a NUL in any parameter is refused
    here, for every list and feed, as no stored text can hold one (PostgreSQL refuses it mid-query)."""
    params = dict(request.query_params)
    for key, value in params.items():
        if NUL in key or NUL in value:
            raise ValidationError("query", key.replace(NUL, "\\x00"), HOLDS_NUL)
    limit = _non_negative(params.get("limit", "100"), "limit")
    offset = _non_negative(params.get("offset", "0"), "offset")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError("query", "limit", f"must be between 1 and {MAX_LIMIT}, not {limit}")
    return limit, offset, {k: v for k, v in params.items() if k not in PAGING}


def page(
    session: Session, model: type[Any], criteria: list[Any], limit: int, offset: int, ordering: list[Any] | None = None
) -> tuple[int, list[Any]]:
    """How many rows match, and one page of them (in id order unless ``ordering`` says otherwise)."""
    total = session.scalar(sa.select(sa.func.count()).select_from(model).where(*criteria)) or 0
    query = sa.select(model).where(*criteria).order_by(*(ordering or [model.id]))
    return total, list(session.scalars(query.limit(limit).offset(offset)))


def searched(model: type[Model], request: Request) -> tuple[list[Any], list[Any]]:
    """``?q=`` (in the row's name) and ``?sort=[-]field`` (any column) of a model list, as criteria and ordering."""
    q, sort = request.query_params.get("q"), request.query_params.get("sort")
    columns = {c.key: getattr(model, c.key) for c in table_of(model).columns if hasattr(model, c.key)}
    named = [columns["name"]] if "name" in columns else []
    return contains(named, q), order(columns, sort, "id", model.id)


def _non_negative(text: str, name: str) -> int:
    # ASCII digits only ("²".isdigit() is true, int("²") fails), and few enough for SQLite's 64 bits.
    if not re.fullmatch(r"[0-9]{1,18}", text):
        raise ValidationError("query", name, f"must be a non-negative integer below 10^18, not {text[:40]!r}")
    return int(text)


def models_router(database: Database) -> APIRouter:
    router = APIRouter(prefix="/api/v1", tags=["models"])

    @router.get("/kinds")
    def kinds() -> list[dict[str, Any]]:
        """Every model kind with its fields and natural key."""
        return [
            {
                "kind": model.__name__,
                "key": list(model.natural_key),
                "fields": sorted(c.key for c in model.__table__.columns if hasattr(model, c.key)),  # type: ignore[attr-defined]
            }
            for model in user_models()
        ]

    @router.post("/apply")
    async def apply(request: Request) -> dict[str, Any]:
        """Create or update every document of a YAML or JSON body in one transaction (``kuberaven apply -f``)."""
        body = await request.body()  # bounded by guards.py as it arrives
        # Parsing and writing take CPU and the database: a worker thread, never the event loop that
        # serves the probes, the watches and every other request.
        return await run_in_threadpool(_apply, database, body)

    @router.get("/{kind}")
    def list_rows(kind: str, request: Request, at: str | None = None) -> dict[str, Any]:
        """Rows of a kind; filter with ``?field=value`` (references by name), search names with ``?q=TEXT``,
        sort with ``?sort=[-]field``, page with limit and offset; ``?at=TIME`` (ISO 8601, or ``-10m``): the rows
        as they stood then."""
        model = _model(kind)
        limit, offset, filters = page_params(request)
        search, ordering = searched(model, request)
        with database.session() as session:
            if at is None:
                criteria = [*document_criteria(session, model, filters), *search]
                total, rows = page(session, model, criteria, limit, offset, ordering)
            elif search or "sort" in request.query_params:
                raise ValidationError("query", "at", "q and sort list the rows of now, not of another time")
            else:
                snapshot = _snapshot(session, at)
                total, rows = snapshot.query(model, document_filters(snapshot, model, filters), limit, offset)
            items = [to_document(row) for row in rows]
        answer = {"kind": model.__name__, "total": total, "limit": limit, "offset": offset, "items": items}
        return answer if at is None else {**answer, "at": snapshot.at.isoformat()}

    @router.get("/{kind}/{reference:path}/history")
    def row_history(kind: str, reference: str) -> dict[str, Any]:
        """Every version of one object, oldest first, with what changed; deleted objects included.
        (A row named ``history`` is read by its id or with ``?name=history``.)"""
        model = _model(kind)
        with database.session() as session:
            found = versions(session.connection(), model, reference)
        return {"kind": model.__name__, "reference": reference, "versions": [v.as_document() for v in found]}

    @router.get("/{kind}/{reference:path}")
    def get_row(kind: str, reference: str, at: str | None = None) -> dict[str, Any]:
        """One row by id, name or qualified name (``namespace/name``); ``?at=TIME``: as it stood then."""
        model = _model(kind)
        with database.session() as session:
            if at is None:
                return to_document(_resolve(session, model, reference))
            return to_document(resolve_at(_snapshot(session, at), model, as_reference(reference)))

    @router.post("/{kind}", status_code=201)
    def create_row(kind: str, document: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
        """Create one row; 409 if one with the same name exists (PATCH it instead)."""
        model = _model(kind)
        fields = _fields(model, document)
        with database.session() as session:
            with _changing(session, model):
                row = create_document(session, model, fields)
            flush_or_raise(session, row)
            return to_document(row)

    @router.patch("/{kind}/{reference:path}")
    def update_row(kind: str, reference: str, document: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008
        """Change the given fields of one row."""
        model = _model(kind)
        fields = _fields(model, document)
        with database.session() as session:
            row = _resolve(session, model, reference)
            with _changing(session, model):
                update_document(session, row, fields)
            flush_or_raise(session, row)
            return to_document(row)

    @router.delete("/{kind}/{reference:path}")
    def delete_row(kind: str, reference: str, cascade: bool = False, dry_run: bool = False) -> dict[str, Any]:
        """Delete one row by the model's rule (409 naming what it would delete unless ``cascade``);
        ``dry_run`` answers what would be deleted. kuberaven then deletes the Kubernetes objects it made."""
        model = _model(kind)
        with database.session() as session:
            plan = delete_reference(session, model, reference, cascade=cascade, dry_run=dry_run)
            if dry_run:
                session.rollback()
        return {**plan.target.as_document(), "dry_run": dry_run, "deleted": [r.as_document() for r in plan.rows]}

    return router


def _apply(database: Database, body: bytes) -> dict[str, Any]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DocumentError(BODY, None, f"not UTF-8 text (byte {error.start})") from None
    text, in_json = _one_document_a_line(text)
    try:
        documents = parse_documents(text, BODY)
        if not documents:
            raise DocumentError(BODY, None, "no model objects in the body")
        if len(documents) > MAX_DOCUMENTS:
            raise DocumentError(BODY, None, f"{len(documents)} documents; at most {MAX_DOCUMENTS} a request")
        with database.session() as session:
            applied = apply_documents(session, documents, BODY)
            results = [{"action": action, **to_document(row)} for action, row in applied]
    except DocumentError as error:
        raise BodyError(_located(error, in_json)) from None
    return {"items": results}


class BodyError(ModelError):
    """A bad document of an apply body, named by its place in the body (422)."""


def _one_document_a_line(text: str) -> tuple[str, bool]:
    """A JSON body rewritten with document N on line N + 1 (a page's JSON.stringify puts them all on
    line 1, where a line number says nothing), and whether it was JSON; YAML as it came."""
    if not text.lstrip().startswith(("[", "{")):
        return text, False
    try:
        loaded = json.loads(text)
    except ValueError:
        return text, False  # not JSON after all: the YAML parser names the problem and its line
    items = loaded if isinstance(loaded, list) else [loaded]
    return "[\n" + ",\n".join(json.dumps(item) for item in items) + "\n]\n", True


def _located(error: DocumentError, in_json: bool) -> str:
    """``line 4: …`` for YAML, ``document 3: …`` for JSON, instead of ``request body:1: …``."""
    said = str(error)
    if error.line is None:
        return said.removeprefix(f"{BODY}: ")
    said = said.removeprefix(f"{BODY}:{error.line}: ")
    return f"document {error.line - 1}: {said}" if in_json else f"line {error.line}: {said}"


def _model(kind: str) -> type[Model]:
    """The model a URL names; an unknown kind is a 404 (no such collection), naming the known ones."""
    try:
        return model_for(kind)
    except ValidationError as error:
        raise DoesNotExist(str(error)) from None


@contextlib.contextmanager
def _changing(session: Session, model: type[Model]) -> Iterator[None]:
    """Apply a body: no flush before it is whole (flush_or_raise does it, naming the broken rule),
    and a body naming a row that does not exist is bad input (422), not a missing URL (404)."""
    try:
        with session.no_autoflush:
            yield
    except DoesNotExist as error:
        raise ValidationError(model.__name__, None, str(error)) from None


def _snapshot(session: Session, at: str) -> Snapshot:
    connection = session.connection()
    return Snapshot(connection, checked_time(connection, at))


def _resolve(session: Session, model: type[Model], reference: str) -> Model:
    return resolve(session, model, as_reference(reference))


def _fields(model: type[Model], document: dict[str, Any]) -> dict[str, Any]:
    """The body without ``kind``, which must name the URL's kind if given."""
    fields = dict(document)
    kind = fields.pop("kind", model.__name__)
    if not isinstance(kind, str) or not names_kind(kind, model):
        raise ValidationError(model.__name__, "kind", f"the body says {kind!r} but the URL says {model.__name__}")
    return fields
