"""Errors as HTTP answers (web/): every failure is ``{"detail": "<what is wrong>"}`` with a 4xx or 503.

The mapping is the CLI's: the same messages, from the same model errors.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from ..model import Model
from ..model.database import integrity_error, row_name
from ..model.errors import (
    AlreadyExists,
    DeleteRefused,
    DoesNotExist,
    ModelError,
    MultipleObjectsReturned,
    ValidationError,
)

STATUS: list[tuple[type[Exception], int]] = [
    (DoesNotExist, 404),
    (AlreadyExists, 409),
    (DeleteRefused, 409),
    (MultipleObjectsReturned, 400),
    (ValidationError, 422),
    (ModelError, 422),  # DocumentError and the rest: bad input
]


def flush_or_raise(session: Session, row: Model) -> None:
    """Flush now so that the database's own rules answer as model errors, inside the transaction."""
    name = row_name(row)  # before the flush: a failed one expires the row's attributes
    try:
        session.flush()
    except sa.exc.IntegrityError as error:
        raise integrity_error(row, error, name) from None


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ModelError)
    async def model_error(_request: Request, error: ModelError) -> JSONResponse:
        status = next(code for kind, code in STATUS if isinstance(error, kind))
        return JSONResponse({"detail": str(error)}, status_code=status)

    @app.exception_handler(sa.exc.OperationalError)
    async def database_down(_request: Request, error: sa.exc.OperationalError) -> JSONResponse:
        return JSONResponse({"detail": f"database unavailable: {error.orig}"}, status_code=503)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": "; ".join(_describe(e) for e in error.errors())}, status_code=422)


def _describe(problem: dict[str, Any]) -> str:
    if problem.get("type") == "json_invalid":
        return f"the request body is not valid JSON ({problem.get('ctx', {}).get('error', 'cannot parse')})"
    where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body") or "body"
    return f"{where}: {problem.get('msg', 'invalid')}"
