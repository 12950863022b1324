"""What deleting a row does (model/): one rule for the Python API, the CLI and REST.

    row.delete() / kuberaven delete / DELETE /api/v1/<kind>/<ref>
        ──► plan_delete (what the database would remove with the row, what refers to it)
        ──► refusal (the rule, a pure function) ──► session.delete ──► tombstones.py ──► provisioning/

The rule keeps users' data safe:

* a row that other rows refer to without cascading (an Image an instance
  runs) is never deleted: delete those first;
* a row that would take other rows with it (a Site its Slices, a TrustDomain
  its Slices and pods, a Slice its instances) is deleted only when the caller
  says ``cascade``, since the managed ones among them are then deleted in
  Kubernetes too; otherwise the refusal lists what would go;
* the parts of a row (a pod's volume mounts, a Service's ports) go with it;
* ``dry_run`` answers what would be deleted and deletes nothing.

Which Kubernetes objects then go is tombstones.py's rule (managed rows only;
deleting a cluster row deletes nothing in the cluster).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from .base import Model, bind_remove, table_of
from .cluster import KubernetesService
from .documents import qualified_name, resolve, user_models
from .errors import DeleteRefused
from .tombstones import PARENTS, deletes_object

CASCADE = "CASCADE"
SET_NULL = "SET NULL"
LISTED = 10  # rows a refusal names before "and N more"


@dataclass(frozen=True)
class Doomed:
    """A row a delete removes."""

    kind: str
    id: int
    name: str
    managed: bool
    in_kubernetes: bool  # the sync loop deletes its Kubernetes object

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r}" + (" (deleted in Kubernetes)" if self.in_kubernetes else "")

    def as_document(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "name": self.name,
            "xos_managed": self.managed,
            "in_kubernetes": self.in_kubernetes,
        }


@dataclass(frozen=True)
class DeletePlan:
    """What deleting ``target`` means: the rows the database removes with it, and the rows that forbid it."""

    target: Doomed
    cascaded: tuple[Doomed, ...] = ()  # user rows that go with it (its parts not counted)
    blockers: tuple[Doomed, ...] = ()  # rows that refer to it and stay
    # The rows the walk loaded: the database deletes them, so the session must forget them.
    loaded: tuple[Model, ...] = field(default=(), compare=False, repr=False)

    @property
    def rows(self) -> tuple[Doomed, ...]:
        return (self.target, *self.cascaded)


def refusal(plan: DeletePlan, *, cascade: bool) -> str | None:
    """The rule: why this delete must not happen, or None when it may."""
    if plan.blockers:
        referring = _listing(plan.blockers)
        return f"{plan.target.kind} {plan.target.name!r} is still referenced by {referring}; delete those first"
    if plan.cascaded and not cascade:
        count = len(plan.cascaded)
        return (
            f"deleting {plan.target.kind} {plan.target.name!r} would delete {count} other row{'s' if count > 1 else ''}"
            f" with it: {_listing(plan.cascaded)}; delete with cascade to delete them too (nothing was deleted)"
        )
    return None


def _listing(rows: tuple[Doomed, ...]) -> str:
    named = ", ".join(str(row) for row in rows[:LISTED])
    return named + (f" and {len(rows) - LISTED} more" if len(rows) > LISTED else "")


def delete(session: Session, row: Model, *, cascade: bool = False, dry_run: bool = False) -> DeletePlan:
    """Delete ``row`` by the rule (flushed, not committed: the caller's transaction), or raise DeleteRefused."""
    plan = plan_delete(session, row)
    problem = refusal(plan, cascade=cascade)
    if problem is not None:
        raise DeleteRefused(problem)
    if not dry_run:
        session.delete(row)
        try:
            session.flush()
        except sa.exc.IntegrityError as error:  # a reference written since the plan was made
            raise DeleteRefused(f"{plan.target.kind} {plan.target.name!r} is still referenced: {error.orig}") from None
        for gone in plan.loaded:
            if gone in session:
                session.expunge(gone)  # else a new row given its id later meets it in the identity map
    return plan


def delete_reference(
    session: Session, model: type[Model], reference: str, *, cascade: bool = False, dry_run: bool = False
) -> DeletePlan:
    """Delete the row a user names (id, name or qualified name): the CLI's and REST's entry."""
    # isascii: "²".isdigit() is true, but it is a name, not an id.
    key: str | int = int(reference) if reference.isascii() and reference.isdigit() else reference
    return delete(session, resolve(session, model, key), cascade=cascade, dry_run=dry_run)


def plan_delete(session: Session, row: Model) -> DeletePlan:
    """Walk the foreign keys from ``row``: what ON DELETE CASCADE removes, and what RESTRICT keeps it for."""
    forgetting = isinstance(row, KubernetesService)  # a cluster row: nothing in the cluster is deleted
    doomed: dict[tuple[str, int], Model] = {(table_of(row).name, row.id): row}
    blockers: dict[tuple[str, int], Model] = {}
    frontier: list[tuple[sa.Table, list[int]]] = [(table_of(row), [row.id])]
    while frontier:
        table, ids = frontier.pop(0)
        for child, column, ondelete in _references_to(table):
            model = _base_model(child)
            if model is None or ondelete == SET_NULL:
                continue  # not a model's table, or the referring rows stay (the reference cleared)
            found = [r for r in session.scalars(sa.select(model).where(column.in_(ids))) if _key(r) not in doomed]
            if ondelete != CASCADE:
                blockers.update((_key(r), r) for r in found)
                continue
            doomed.update((_key(r), r) for r in found)
            if found:
                frontier.append((child, [r.id for r in found]))
    users = set(user_models())
    return DeletePlan(
        target=_doomed(row, forgetting),
        cascaded=tuple(
            _doomed(r, forgetting)
            for key, r in doomed.items()
            if r is not row and type(r) in users and key[0] not in PARENTS
        ),
        # forgetting=True: a row that keeps this one stays, and so does its object.
        blockers=tuple(_doomed(r, forgetting=True) for key, r in blockers.items() if key not in doomed),
        loaded=tuple(r for r in doomed.values() if r is not row),
    )


def _references_to(table: sa.Table) -> Iterator[tuple[sa.Table, sa.Column[Any], str]]:
    for child in Model.metadata.sorted_tables:
        for fk in child.foreign_keys:
            if fk.column.table is table:
                yield child, fk.parent, (fk.ondelete or "").upper()


def _base_model(table: sa.Table) -> type[Model] | None:
    """The model that loads every row of a table (the base of single-table inheritance)."""
    for mapper in Model.registry.mappers:
        if mapper.local_table is table and mapper.inherits is None:
            return mapper.class_  # type: ignore[no-any-return]
    return None


def _key(row: Model) -> tuple[str, int]:
    return table_of(row).name, row.id


def _doomed(row: Model, forgetting: bool) -> Doomed:
    kind = type(row).__name__
    managed = bool(getattr(row, "xos_managed", False))
    fields = {"xos_managed": managed, "trust_domain_id": getattr(row, "trust_domain_id", None)}
    in_kubernetes = not forgetting and deletes_object(kind, type(row), fields)
    return Doomed(kind, row.id, qualified_name(row), managed, in_kubernetes)


def remove(session: Session, row: Model, *, cascade: bool = False, dry_run: bool = False) -> DeletePlan:
    """``row.delete()``: delete by the rule and commit (a dry run or a refusal changes nothing)."""
    try:
        if row not in session:
            row = session.merge(row)
        plan = delete(session, row, cascade=cascade, dry_run=dry_run)
        if dry_run:
            session.rollback()
        else:
            session.commit()
        return plan
    except BaseException:
        session.rollback()
        raise


bind_remove(remove)
