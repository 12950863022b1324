"""Errors of the data model (model/): what the Python API, the CLI and REST report.

Every error names the model, the row and the field or reference at fault, so
that a user can fix their input without reading a traceback.
"""

from __future__ import annotations


class ModelError(Exception):
    """Base of every data-model error."""


class ValidationError(ModelError):
    """A value or a combination of values the model does not accept; nothing was stored."""

    def __init__(self, model: str, field: str | None, message: str) -> None:
        self.model = model
        self.field = field
        self.message = message
        where = f"{model}.{field}" if field else model
        super().__init__(f"{where}: {message}")


class DoesNotExist(ModelError):
    """No row matches; ``get()`` and name references raise it."""


class MultipleObjectsReturned(ModelError):
    """More than one row matches where exactly one was expected."""


class DatabaseUnavailable(ModelError):
    """The database cannot be reached or opened."""


class DatabaseURLError(ModelError):
    """A database URL kuberaven cannot use: malformed, or for a database it has no driver for."""


class AlreadyExists(ModelError):
    """A create (REST POST) names a row that exists already."""


class DeleteRefused(ModelError):
    """The change contradicts stored rows: a delete of a row others refer to, or one that would take others with it."""
