"""Declarative base, bookkeeping fields and the ``Model.objects`` API (model/).

Every table carries the original XOS bookkeeping (created, updated, enacted,
backend_status, backend_code, ...). ``updated`` moves only when a user
changes a row (``save()``), never when the inventory records what it
observed, so "dirty" keeps meaning *enacted < updated*.

``Model.objects`` is the Django-style API the seeds use
(``KubernetesService.objects.first()``, ``Image.objects.filter(name=...)``);
it runs on the thread's session of the connected :class:`Database`.
"""

import datetime as dt
import enum
import functools
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.types import TypeDecorator

from .checks import check_row
from .errors import DoesNotExist, MultipleObjectsReturned, ValidationError

BACKEND_STATUS_NEW = "Provisioning in progress"
STATUS_OK = "OK"  # backend_status (and policy_status) of a row in step


class SyncCode(enum.IntEnum):
    """backend_code and policy_code of a row, as XOS spells them."""

    NEW = 0  # not done yet: new, waiting for another row, or to be re-created
    OK = 1
    ERROR = 2  # backend_status / policy_status says why


def _not_connected() -> Session:
    raise RuntimeError("no database: import kuberaven.model (its database module binds the session)")


# The thread's session of the connected database, for Model.objects and save()/delete().
# database.py binds it when imported: this module sits below it and does not import it.
_current_session: Callable[[], Session] = _not_connected


def bind_session(source: Callable[[], Session]) -> None:
    global _current_session
    _current_session = source


def thread_session() -> Session:
    """The thread's session of the connected database (what Model.objects runs on)."""
    return _current_session()


def _no_history(model: "type[Model]", at: Any) -> Any:
    raise RuntimeError("history is not loaded: import kuberaven.model (its database module binds it)")


# Model.objects.at(time): asof.py's AsOfQuerySet, bound by database.py (both sit above this module).
_as_of: "Callable[[type[Model], Any], Any]" = _no_history


def bind_as_of(query: "Callable[[type[Model], Any], Any]") -> None:
    global _as_of
    _as_of = query


def _not_loaded(_session: Session, _row: "Model", **_flags: bool) -> Any:
    raise RuntimeError("deletes are not loaded: import kuberaven.model (its deletes module binds them)")


# row.delete(): deletes.py's remove, bound when it is imported (it sits above this module:
# the rule walks every model's tables).
_remove: Callable[..., Any] = _not_loaded


def bind_remove(remove: Callable[..., Any]) -> None:
    global _remove
    _remove = remove


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Stored as naive UTC (SQLite has no time zones), returned as aware UTC."""

    impl = sa.DateTime
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: sa.Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use UTC-aware datetimes")
        return value.astimezone(dt.UTC).replace(tzinfo=None)

    def process_result_value(self, value: dt.datetime | None, dialect: sa.Dialect) -> dt.datetime | None:
        return None if value is None else value.replace(tzinfo=dt.UTC)


NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

M = TypeVar("M", bound="Model")


class QuerySet(Generic[M]):
    """A lazily evaluated, filterable list of rows of one model."""

    def __init__(self, model: type[M], criteria: tuple[Any, ...] = (), order: tuple[Any, ...] = ()) -> None:
        self.model = model
        self.criteria = criteria
        self.order = order or (model.id,)

    def _statement(self) -> sa.Select[Any]:
        # populate_existing: a row loaded earlier in this thread shows what is stored now.
        statement = sa.select(self.model).where(*self.criteria).order_by(*self.order)
        return statement.execution_options(populate_existing=True)

    def filter(self, *criteria: Any, **fields: Any) -> "QuerySet[M]":
        return QuerySet(self.model, self.criteria + criteria + _field_criteria(self.model, fields), self.order)

    def exclude(self, **fields: Any) -> "QuerySet[M]":
        return QuerySet(
            self.model, (*self.criteria, sa.not_(sa.and_(*_field_criteria(self.model, fields)))), self.order
        )

    def order_by(self, *names: str) -> "QuerySet[M]":
        columns = tuple(
            getattr(self.model, n[1:]).desc() if n.startswith("-") else getattr(self.model, n) for n in names
        )
        return QuerySet(self.model, self.criteria, columns)

    def all(self) -> list[M]:
        return self._run(lambda s: list(s.scalars(self._statement())))

    def first(self) -> M | None:
        return self._run(lambda s: s.scalars(self._statement().limit(1)).first())

    def get(self, **fields: Any) -> M:
        query = self.filter(**fields)
        rows = query._run(lambda s: list(s.scalars(query._statement().limit(2))))
        if not rows:
            raise DoesNotExist(f"{self.model.__name__} matching {_describe(fields)} does not exist")
        if len(rows) > 1:
            raise MultipleObjectsReturned(f"more than one {self.model.__name__} matches {_describe(fields)}")
        return rows[0]

    def count(self) -> int:
        statement = sa.select(sa.func.count()).select_from(self.model).where(*self.criteria)
        return self._run(lambda s: s.scalar(statement) or 0)

    def exists(self) -> bool:
        return self.first() is not None

    def at(self, time: str | dt.datetime) -> Any:
        """The rows as they stood at ``time`` (an aware datetime, ISO 8601 text, or ``-10m``): asof.py's
        AsOfQuerySet, read-only, filterable with ``.filter(field=value)`` after at()."""
        if self.criteria:
            raise ValidationError(self.model.__name__, None, "at() comes first: objects.at(t).filter(...)")
        return _as_of(self.model, time)

    def delete(self, *, cascade: bool = False, dry_run: bool = False) -> int:
        """Delete every matching row by the rule of deletes.py, each in its own transaction."""
        rows = self.all()
        for row in rows:
            row.delete(cascade=cascade, dry_run=dry_run)
        return len(rows)

    def _run(self, work: Any) -> Any:
        session = _current_session()
        try:
            result = work(session)
            session.commit()  # ends the read transaction; objects stay loaded
            return result
        except BaseException:
            session.rollback()
            raise

    def __iter__(self) -> Iterator[M]:
        return iter(self.all())

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, index: int) -> M:
        return self.all()[index]

    def __bool__(self) -> bool:
        return self.exists()


def _field_criteria(model: "type[Model]", fields: dict[str, Any]) -> tuple[Any, ...]:
    criteria = []
    for key, value in fields.items():
        name, _, op = key.partition("__")
        column = getattr(model, name, None)
        if column is None or not hasattr(column, "property"):
            raise ValidationError(model.__name__, name, "no such field")
        if op == "in":
            criteria.append(column.in_(list(value)))
        elif op == "contains":
            criteria.append(column.contains(value))
        elif op == "":
            criteria.append(column.is_(None) if value is None else column == value)
        else:
            raise ValidationError(
                model.__name__, name, f"unknown lookup {op!r} (use field, field__in or field__contains)"
            )
    return tuple(criteria)


def _describe(fields: dict[str, Any]) -> str:
    return ", ".join(f"{k}={getattr(v, 'name', v)!r}" for k, v in fields.items()) or "anything"


class _Manager:
    """``Model.objects``: a descriptor that hands out a QuerySet of the model."""

    def __get__(self, instance: object, owner: type[M]) -> QuerySet[M]:
        if instance is not None:
            raise AttributeError("objects is reached through the model class, not a row")
        return QuerySet(owner)


class Model(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dt.datetime: UTCDateTime, dict[str, Any]: sa.JSON}

    objects: ClassVar[_Manager] = _Manager()  # type: ignore[assignment]
    # Fields that identify a row for references by name (apply -f, get, delete).
    natural_key: ClassVar[tuple[str, ...]] = ("name",)
    # Fields the inventory writes from what Kubernetes reports: no user path may write them.
    observed_fields: ClassVar[frozenset[str]] = frozenset()
    # Other names a field is accepted under (the original's documented names): alias → field.
    aliases: ClassVar[dict[str, str]] = {}

    id: Mapped[int] = mapped_column(primary_key=True)

    def __init__(self, **fields: Any) -> None:
        # Scalar column defaults apply at construction (not only at INSERT),
        # so validate() and the caller see the values that will be stored.
        for key, value in _scalar_defaults(type(self)):
            fields.setdefault(key, value)
        for name, value in fields.items():
            if not hasattr(type(self), name):
                raise ValidationError(type(self).__name__, name, "no such field")
            setattr(self, name, value)

    def validate(self, session: Session) -> None:
        """Check the row before it is stored; raise ValidationError. Models extend this."""

    def save(self) -> None:
        _not_past(self)
        store(_current_session(), self)

    def delete(self, *, cascade: bool = False, dry_run: bool = False) -> Any:
        """Delete this row by the rule of deletes.py (``cascade``: with the rows that go with it);
        returns its DeletePlan: what went, or with ``dry_run`` what would go."""
        _not_past(self)
        return _remove(_current_session(), self, cascade=cascade, dry_run=dry_run)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} {getattr(self, 'name', '')!r}>"


def _not_past(row: Model) -> None:
    at = getattr(row, "_kuberaven_as_of", None)  # asof.py's mark on a version of the past
    if at is not None:
        raise ValidationError(type(row).__name__, None, f"this is the row as it was at {at.isoformat()}; read-only")


class Bookkeeping:
    """The XOS bookkeeping fields every model carries."""

    created: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated: Mapped[dt.datetime] = mapped_column(default=utcnow)
    enacted: Mapped[dt.datetime | None]
    policed: Mapped[dt.datetime | None]
    backend_status: Mapped[str] = mapped_column(sa.Text, default=BACKEND_STATUS_NEW)
    backend_code: Mapped[int] = mapped_column(default=SyncCode.NEW)
    backend_handle: Mapped[str | None] = mapped_column(sa.String(1024))
    policy_status: Mapped[str | None] = mapped_column(sa.Text)
    policy_code: Mapped[int] = mapped_column(default=SyncCode.NEW)
    xos_managed: Mapped[bool] = mapped_column(default=True)
    deleted: Mapped[bool] = mapped_column(default=False)
    backend_need_delete: Mapped[bool] = mapped_column(default=False)
    no_sync: Mapped[bool] = mapped_column(default=False)
    no_policy: Mapped[bool] = mapped_column(default=False)
    # Take over a Kubernetes object of the same name that kuberaven did not create. The server default is
    # migration 0002's (it added the column to tables with rows); a fresh schema (schema.py) has it too.
    adopt: Mapped[bool] = mapped_column(default=False, server_default=sa.false())


class Observed:
    """Identity of the Kubernetes object a row mirrors (set by the inventory)."""

    observed_fields: ClassVar[frozenset[str]] = frozenset({"uid", "resource_version"})

    uid: Mapped[str | None] = mapped_column(sa.String(64), index=True)
    resource_version: Mapped[str | None] = mapped_column(sa.String(64))


def store(session: Session, row: Model) -> None:
    """Validate and save one row (``row.save()``), marking it changed by a user."""
    try:
        if row not in session:
            session.add(row)
        with session.no_autoflush:
            check_row(session, row)
        row.updated = utcnow()  # type: ignore[attr-defined]  # every model mixes in Bookkeeping
        session.commit()
    except IntegrityError as error:
        session.rollback()
        raise integrity_error(row, error) from None
    except BaseException:
        session.rollback()
        raise


def integrity_error(row: Model, error: IntegrityError, name: str | None = None) -> ValidationError:
    """Say in words which rule a rejected row broke (``name``: row_name(row) taken before the flush,
    which expires a persistent row's attributes when it fails)."""
    text = str(error.orig).lower()
    model = type(row).__name__
    name = name or row_name(row)
    if "unique" in text or "duplicate" in text:
        key = ", ".join(row.natural_key)
        return ValidationError(model, None, f"{name} already exists (unique by {key})")
    if "foreign key" in text:
        return ValidationError(model, None, f"{name} refers to a row that does not exist")
    if "not null" in text or "null value" in text:
        return ValidationError(model, None, f"{name} is missing a required field: {error.orig}")
    return ValidationError(model, None, f"{name} was rejected by the database: {error.orig}")


def row_name(row: Model) -> str:
    return repr(getattr(row, "name", None) or getattr(row, "mount_path", None) or row.id)


@functools.cache
def _scalar_defaults(model: type[Model]) -> tuple[tuple[str, Any], ...]:
    # (hasattr: a table shared by several models holds columns of the others too)
    return tuple(
        (column.key, column.default.arg)  # type: ignore[attr-defined]  # a ScalarElementColumnDefault
        for column in table_of(model).columns
        if column.default is not None and column.default.is_scalar and hasattr(model, column.key)
    )


def table_of(model: type[Model] | Model) -> sa.Table:
    """A model's Table. SQLAlchemy types a declarative class's ``__table__`` as a FromClause; ours are Tables."""
    return model.__table__  # type: ignore[return-value]
