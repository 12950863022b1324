"""What the table modules share (model/): the foreign-key shorthand and validate()'s checks.

    names.py (pure: what is wrong with a name) ──► check_name / check_plain_name ──► ValidationError
    cluster.py, workloads.py, journal.py (columns and validate()) ◄── fk, require

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
