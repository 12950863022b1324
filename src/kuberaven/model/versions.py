"""One object's versions (model/): ``kuberaven history KIND NAME`` and ``/api/v1/<kind>/<name>/history``.

    history.py's table of the kind + the current row ──► every version whose row the name named
        ──► asof.Snapshot at each version's start (its references as they were) ──► documents
        ──► changes(): what differs from the version before (pure)

Deleted objects are included: a name is looked up in the history as well as
in the present, and an object deleted and made again under the same name
(a new pod of a StatefulSet) shows each life, each begun by "created".
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .asof import Snapshot, name_criteria, named, polymorphic_criteria, tracked_table
from .base import Model
from .documents import qualified_name, to_document
from .errors import DoesNotExist, MultipleObjectsReturned
from .history import DELETED, ENDED_BY, HISTORY, HISTORY_ID, NOT_A_CHANGE, VALID_FROM, VALID_UNTIL

CREATED = "created"
UPDATED = "updated"
# Document fields that are no change of the object's (history.py's NOT_A_CHANGE, as documents name them),
# and a Secret's values, which history never keeps (history.py's NEVER_KEPT).
IGNORED = NOT_A_CHANGE | {"id", "created"}
IGNORED_OF_KIND = {"KubernetesSecret": frozenset({"data"})}


@dataclass
class Version:
    """One version of an object: its document, when it held, and how it differs from the one before."""

    document: dict[str, Any]
    valid_from: dt.datetime
    valid_until: dt.datetime | None  # None: the current version
    ended_by: str | None  # "updated", "deleted", or None (current)
    started_by: str = UPDATED
    changes: dict[str, list[Any]] = field(default_factory=dict)

    def as_document(self) -> dict[str, Any]:
        return {
            "valid_from": self.valid_from.isoformat(),
            "valid_until": self.valid_until.isoformat() if self.valid_until else None,
            "started_by": self.started_by,
            "ended_by": self.ended_by,
            "changes": self.changes,
            "object": self.document,
        }


def changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """Each field whose value differs between two documents of an object: [before, after]."""
    ignored = IGNORED | IGNORED_OF_KIND.get(after.get("kind", ""), frozenset())
    fields = [k for k in after if k not in ignored and k != "kind"]
    return {k: [before.get(k), after[k]] for k in fields if before.get(k) != after[k]}


def versions(db: Connection, model: type[Model], reference: str) -> list[Version]:
    """Every version of the object(s) ``reference`` names, oldest first; DoesNotExist if it never existed."""
    table = tracked_table(model)
    history = HISTORY[table.name]
    criteria, scoped = name_criteria(model, reference)
    names = [c.name for c in table.columns]
    past = sa.select(
        *(history.c[n] for n in names), history.c[VALID_FROM], history.c[VALID_UNTIL], history.c[ENDED_BY]
    ).where(*polymorphic_criteria(model, history.c), *(c(history.c) for c in criteria))
    rows = [dict(r) for r in db.execute(past.order_by(history.c[VALID_FROM], history.c[HISTORY_ID])).mappings()]
    current = sa.select(table).where(*polymorphic_criteria(model, table.c), *(c(table.c) for c in criteria))
    for stored in db.execute(current).mappings():
        row = dict(stored)
        ends = [r[VALID_UNTIL] for r in rows if r["id"] == row["id"] and r[VALID_UNTIL] >= row["created"]]
        row.update({VALID_FROM: max([row["created"], *ends]), VALID_UNTIL: None, ENDED_BY: None})
        rows.append(row)
    found = _documents(db, table, rows, reference, scoped)
    if not found:
        raise DoesNotExist(f"{model.__name__} {reference!r} has no versions (never existed, or pruned)")
    objects = {qualified_name(instance) for instance, _ in found}
    if len(objects) > 1:
        raise MultipleObjectsReturned(
            f"{model.__name__} {reference!r} is ambiguous in the history; say one of: {', '.join(sorted(objects))}"
        )
    return _chain(found)


def _documents(
    db: Connection, table: sa.Table, rows: list[dict[str, Any]], reference: str, scoped: bool
) -> list[tuple[Model, dict[str, Any]]]:
    """Each version's instance (its references as they were when it began) and its row, if the reference names it."""
    found = []
    for row in sorted(rows, key=lambda r: r[VALID_FROM]):
        (instance,) = Snapshot(db, row[VALID_FROM]).build(table, [row])
        if named([instance], reference, scoped):
            found.append((instance, row))
    return found


def _chain(found: list[tuple[Model, dict[str, Any]]]) -> list[Version]:
    """Versions in order; a new life (another row, or after a delete) begins with "created"."""
    result: list[Version] = []
    previous: tuple[int, dict[str, Any], str | None] | None = None
    for instance, row in found:
        document = to_document(instance)
        version = Version(document, row[VALID_FROM], row[VALID_UNTIL], row[ENDED_BY])
        if previous is None or previous[0] != row["id"] or previous[2] == DELETED:
            version.started_by = CREATED
        else:
            version.changes = changes(previous[1], document)
        result.append(version)
        previous = (row["id"], document, row[ENDED_BY])
    return result
