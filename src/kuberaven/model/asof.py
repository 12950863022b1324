"""The model as it stood at a time (model/): ``get --at``, ``?at=`` and ``Model.objects.at()``.

    history.py's tables + the model tables ──at_query(table, T)──► every row's version that held at T
        ──Snapshot.build()──► read-only instances of the models, their references (trust_domain, slice, ...)
                              as they stood at T too ──► documents.py's to_document(), as for the present

A version held at T if ``valid_from <= T < valid_until`` (a history row),
or if it is the current row and no history row of it ended after T. The
instances are never in a session; ``save()`` and ``delete()`` refuse them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Mapper, attributes

from . import base
from .base import Model, table_of, utcnow
from .documents import FIELD_NAMES, as_reference, qualified_name, typed_value
from .errors import DoesNotExist, MultipleObjectsReturned, ValidationError
from .history import HISTORY, VALID_FROM, VALID_UNTIL, horizon
from .images import parse_image
from .times import FIELD, parse_time

M = TypeVar("M", bound=Model)
AS_OF = "_kuberaven_as_of"  # set on every instance built here: the time it shows


def checked_time(db: Connection, text: str | dt.datetime, now: dt.datetime | None = None) -> dt.datetime:
    """``text`` as a time the stored history can answer for, or ValidationError naming the problem."""
    at = parse_time(text, now or utcnow())
    since = horizon(db)
    if since is None:
        raise ValidationError(FIELD, None, "this database keeps no history (run `kuberaven db upgrade`)")
    if at < since:
        raise ValidationError(
            FIELD,
            None,
            f"{at.isoformat()} is before the history kept, which starts at {since.isoformat()} "
            "(versions older than history_retention are pruned; none were recorded before history was enabled)",
        )
    return at


def tracked_table(model: type[Model]) -> sa.Table:
    table = table_of(model)
    if table.name not in HISTORY:
        raise ValidationError(model.__name__, None, "no history is kept of this kind (only of kuberaven's own models)")
    return table


def at_query(table: sa.Table, at: dt.datetime) -> sa.Subquery:
    """Every row of ``table`` as it was at ``at``: its history row of then, or the current row."""
    history = HISTORY[table.name]
    names = [c.name for c in table.columns]
    past = sa.select(*(history.c[n] for n in names)).where(history.c[VALID_FROM] <= at, history.c[VALID_UNTIL] > at)
    changed_since = sa.select(history.c.id).where(history.c.id == table.c.id, history.c[VALID_UNTIL] > at).exists()
    present = sa.select(*(table.c[n] for n in names)).where(table.c.created <= at, ~changed_since)
    return sa.union_all(present, past).subquery("at")


def polymorphic_criteria(model: type[Model], columns: Any) -> list[Any]:
    """A subclass in a shared table (KubernetesService in service): only its own rows and its subclasses'."""
    mapper: Mapper[Any] = sa.inspect(model)
    if mapper.polymorphic_on is None or mapper.inherits is None:
        return []
    identities = [m.polymorphic_identity for m in mapper.self_and_descendants]
    return [columns[mapper.polymorphic_on.name].in_(identities)]


def _base_mapper(table: sa.Table) -> Mapper[Any]:
    for mapper in Model.registry.mappers:
        if mapper.local_table is table and mapper.inherits is None:
            return mapper
    raise LookupError(f"no model maps {table.name}")


class Snapshot:
    """Builds instances of the rows as they stood at one time, with their references resolved at that time."""

    def __init__(self, db: Connection, at: dt.datetime) -> None:
        self.db = db
        self.at = at
        self.loaded: dict[tuple[str, int], Model | None] = {}

    def query(
        self, model: type[M], where: Sequence[Any] = (), limit: int | None = None, offset: int = 0
    ) -> tuple[int, list[M]]:
        """How many rows of ``model`` held at the time and match ``where`` (on the columns of at_query's
        subquery, given to a callable), and one page of them in id order."""
        at = at_query(tracked_table(model), self.at)
        criteria = [*polymorphic_criteria(model, at.c), *(w(at.c) if callable(w) else w for w in where)]
        page = sa.select(at).where(*criteria).order_by(at.c.id).offset(offset)
        rows = self.db.execute(page.limit(limit) if limit is not None else page).mappings().all()
        if limit is None and not offset:
            total = len(rows)  # the whole list: no count needed
        else:
            total = self.db.execute(sa.select(sa.func.count()).select_from(at).where(*criteria)).scalar() or 0
        return total, self.build(table_of(model), rows)  # type: ignore[return-value]

    def build(self, table: sa.Table, rows: Iterable[Any]) -> list[Model]:
        instances = [self._instance(table, row) for row in rows]
        self._link(instances)
        return instances

    def _instance(self, table: sa.Table, row: Any) -> Model:
        mapper = _base_mapper(table)
        if mapper.polymorphic_on is not None:
            mapper = mapper.polymorphic_map.get(row[mapper.polymorphic_on.name], mapper)
        instance: Model = mapper.class_manager.new_instance()
        state = attributes.instance_dict(instance)
        for prop in mapper.column_attrs:
            state[prop.key] = row[prop.columns[0].name]
        setattr(instance, AS_OF, self.at)
        self.loaded.setdefault((table.name, row["id"]), instance)
        return instance

    def _link(self, instances: list[Model]) -> None:
        """Set every many-to-one reference, loading the rows they name (as of the time) a table at a time."""
        wanted: dict[sa.Table, set[int]] = {}
        links = []
        for instance in instances:
            mapper = sa.inspect(type(instance))
            for rel in mapper.relationships:
                if rel.uselist:
                    continue
                (column,) = rel.local_columns
                target_id = getattr(instance, mapper.get_property_by_column(column).key)
                if target_id is not None:
                    target = rel.mapper.local_table
                    assert isinstance(target, sa.Table)
                    links.append((instance, rel.key, target.name, target_id))
                    if (target.name, target_id) not in self.loaded:
                        wanted.setdefault(target, set()).add(target_id)
        for target, ids in wanted.items():
            self._load(target, ids)
        for instance, key, target_name, target_id in links:
            attributes.set_committed_value(instance, key, self.loaded.get((target_name, target_id)))

    def _load(self, table: sa.Table, ids: set[int]) -> None:
        at = at_query(table, self.at)
        found = list(self.db.execute(sa.select(at).where(at.c.id.in_(sorted(ids)))).mappings())
        missing = ids - {row["id"] for row in found}
        if missing:
            # Not there at the time (a clock's skew, a version begun at that very instant): its nearest version.
            found += self._nearest(table, missing)
        self.build(table, found)
        for target_id in ids:
            self.loaded.setdefault((table.name, target_id), None)

    def _nearest(self, table: sa.Table, ids: set[int]) -> list[Any]:
        present = self.db.execute(sa.select(table).where(table.c.id.in_(sorted(ids)))).mappings().all()
        history = HISTORY[table.name]
        rows = list(present)
        for target_id in ids - {row["id"] for row in present}:
            last = sa.select(history).where(history.c.id == target_id).order_by(history.c[VALID_UNTIL].desc()).limit(1)
            rows += self.db.execute(last).mappings().all()
        return rows


def name_criteria(model: type[Model], reference: str) -> tuple[list[Any], bool]:
    """Criteria on at_query's columns for the rows ``reference`` may name, and whether it names a scope."""
    key = model.natural_key
    if key and key[0] == "name" and len(key) > 1:  # Image: name, tag, digest
        image = parse_image(reference)
        return [
            lambda c: c.name == image.name,
            lambda c: c.tag == image.tag,
            lambda c: c.digest == image.digest,
        ], False
    name_field = key[-1]
    scoped = len(key) > 1 and "/" in reference
    name = reference.rpartition("/")[2] if scoped else reference
    return [lambda c: c[name_field] == name], scoped


def named(instances: Sequence[M], reference: str, scoped: bool) -> list[M]:
    """The instances ``reference`` names: all of them, or with a scope those whose qualified name ends with it."""
    if not scoped:
        return list(instances)
    return [i for i in instances if qualified_name(i) == reference or qualified_name(i).endswith("/" + reference)]


def resolve_at(snapshot: Snapshot, model: type[M], reference: str | int) -> M:
    """The one row of ``model`` that ``reference`` (name, qualified name or id) named at the snapshot's time."""
    when = snapshot.at.isoformat()
    if isinstance(reference, int):
        _, rows = snapshot.query(model, [lambda c: c.id == reference])
        if not rows:
            raise DoesNotExist(f"{model.__name__} with id {reference} did not exist at {when}")
        return rows[0]
    criteria, scoped = name_criteria(model, reference)
    _, candidates = snapshot.query(model, criteria, limit=100)
    rows = named(candidates, reference, scoped)
    if not rows:
        raise DoesNotExist(f"{model.__name__} {reference!r} did not exist at {when}")
    if len(rows) > 1:
        names = ", ".join(qualified_name(r) for r in rows[:10])
        raise MultipleObjectsReturned(f"{model.__name__} {reference!r} was ambiguous at {when}; say one of: {names}")
    return rows[0]


def document_filters(snapshot: Snapshot, model: type[Model], filters: dict[str, str]) -> list[Any]:
    """``field=value`` pairs of a URL's query as criteria on at_query's columns (documents.document_criteria's
    rules; a reference names the row that had that name at the snapshot's time)."""
    relationships = {r.key: r for r in sa.inspect(model).relationships if not r.uselist}
    columns = {c.key: c for c in table_of(model).columns}
    criteria: list[Any] = []
    for alias, text in filters.items():
        field = model.aliases.get(alias) or FIELD_NAMES.get(alias, alias)
        if field in relationships:
            relationship = relationships[field]
            (column,) = relationship.local_columns
            target = resolve_at(snapshot, relationship.mapper.class_, as_reference(text))
            criteria.append(lambda c, n=column.name, v=target.id: c[n] == v)
        elif field in columns and hasattr(model, field) and field != "leaf_model_name":
            value = typed_value(model, field, columns[field], text)
            criteria.append(lambda c, n=columns[field].name, v=value: c[n] == v)
        else:
            raise ValidationError(model.__name__, alias, "no such field")
    return criteria


class AsOfQuerySet(Generic[M]):
    """``Model.objects.at(time)``: the rows of a model as they stood then, filterable by field values."""

    def __init__(self, model: type[M], at: str | dt.datetime, fields: dict[str, Any] | None = None) -> None:
        self.model = model
        self.at = at
        self.fields = fields or {}

    def filter(self, **fields: Any) -> AsOfQuerySet[M]:
        for name in fields:
            column = name.partition("__")[0]
            if column not in table_of(self.model).columns or not hasattr(self.model, column):
                raise ValidationError(self.model.__name__, column, "no such field (filter at a time by column)")
        return AsOfQuerySet(self.model, self.at, {**self.fields, **fields})

    def _criteria(self) -> list[Any]:
        criteria = []
        for key, value in self.fields.items():
            name, _, op = key.partition("__")
            if op == "in":
                criteria.append(lambda c, n=name, v=list(value): c[n].in_(v))
            elif op == "":
                value = getattr(value, "id", value)  # a row given for its foreign key
                criteria.append(lambda c, n=name, v=value: c[n].is_(None) if v is None else c[n] == v)
            else:
                raise ValidationError(self.model.__name__, name, f"unknown lookup {op!r} (use field or field__in)")
        return criteria

    def _run(self, limit: int | None = None) -> list[M]:
        session = base.thread_session()
        try:
            db = session.connection()
            snapshot = Snapshot(db, checked_time(db, self.at))
            return snapshot.query(self.model, self._criteria(), limit)[1]
        finally:
            session.commit()  # ends the read transaction

    def all(self) -> list[M]:
        return self._run()

    def first(self) -> M | None:
        rows = self._run(1)
        return rows[0] if rows else None

    def get(self, **fields: Any) -> M:
        rows = self.filter(**fields)._run(2)
        if not rows:
            raise DoesNotExist(f"{self.model.__name__} matching {fields} did not exist at {self.at}")
        if len(rows) > 1:
            raise MultipleObjectsReturned(f"more than one {self.model.__name__} matched {fields} at {self.at}")
        return rows[0]

    def count(self) -> int:
        return len(self._run())

    def __iter__(self) -> Iterator[M]:
        return iter(self.all())

    def __len__(self) -> int:
        return self.count()
