"""The one way to the database (model/): engine, sessions, schema upgrades, bootstrap.

The Python API, the CLI, the REST API and the daemon all use one
:class:`Database`. SQLite (the embedded default) runs in WAL mode with
foreign keys on; PostgreSQL runs from the same models. The schema is
Alembic's (``kuberaven db upgrade``); ``connect()`` brings it up to date and
runs the first-run bootstrap, so a script needs nothing more than::

    from kuberaven.model import *
    connect("sqlite:///./kuberaven.db")
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, scoped_session, sessionmaker

from .base import Model, check_row, utcnow
from .errors import DatabaseUnavailable, ValidationError

log = logging.getLogger(__name__)

DEFAULT_URL = "sqlite:///./kuberaven.db"
MIGRATIONS = Path(__file__).parent / "migrations"


class Database:
    """An engine and its session factory; thread-safe."""

    def __init__(self, url: str = DEFAULT_URL, **engine_options: Any) -> None:
        self.url = sa.make_url(_normalise(url))
        self.engine = sa.create_engine(self.url, **_engine_options(self.url, engine_options))
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.thread_session = scoped_session(self.sessions)

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose transaction commits on success and rolls back on error."""
        with self.sessions() as session, session.begin():
            yield session

    def upgrade(self, revision: str = "heads") -> None:
        """Bring the schema (kuberaven's and every plugin's branch) to ``revision`` with Alembic (idempotent)."""
        from alembic import command
        from alembic.config import Config

        from ..plugins import migration_locations

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        locations = [MIGRATIONS / "versions", *migration_locations()]
        config.set_main_option("path_separator", "os")
        config.set_main_option("version_locations", os.pathsep.join(str(p) for p in locations))
        try:
            with self.engine.begin() as connection:
                config.attributes["connection"] = connection
                command.upgrade(config, revision)
        except OperationalError as error:
            raise DatabaseUnavailable(f"cannot open database {self.url.render_as_string()}: {error.orig}") from None

    def prepare(self, cluster_kubeconfig: str | None = None, cluster_context: str | None = None) -> None:
        """Upgrade the schema and run the first-run bootstrap."""
        from .bootstrap import bootstrap

        self.upgrade()
        with self.session() as session:
            bootstrap(session, kubeconfig=cluster_kubeconfig, context=cluster_context)

    def dispose(self) -> None:
        self.thread_session.remove()
        self.engine.dispose()


def _normalise(url: str) -> str:
    # "postgresql://" means psycopg 3 here (the driver we install), not psycopg2.
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _engine_options(url: sa.URL, given: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if url.get_backend_name() == "sqlite":
        # Writers wait for each other rather than failing at once.
        options["connect_args"] = {"timeout": 30}
    else:
        options["pool_pre_ping"] = True
    options.update(given)
    return options


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


_current: Database | None = None
_current_lock = threading.RLock()


def connect(url: str | None = None, *, prepare: bool = True) -> Database:
    """Make ``url`` (default: KUBERAVEN_DB or sqlite:///./kuberaven.db) the database of ``Model.objects``."""
    global _current
    from ..settings import Settings

    database = Database(url or Settings().db)
    if prepare:
        database.prepare()
    with _current_lock:
        previous, _current = _current, database
    if previous is not None:
        previous.dispose()
    return database


def current() -> Database:
    """The connected database; connects to the default one on first use."""
    with _current_lock:
        return _current if _current is not None else connect()


def current_session() -> Session:
    return current().thread_session()


def store(session: Session, row: Model) -> None:
    """Validate and save one row (``row.save()``), marking it changed by a user."""
    try:
        if row not in session:
            session.add(row)
        with session.no_autoflush:
            check_row(session, row)
        row.updated = utcnow()
        session.commit()
    except IntegrityError as error:
        session.rollback()
        raise integrity_error(row, error) from None
    except BaseException:
        session.rollback()
        raise


def remove(session: Session, row: Model) -> None:
    try:
        if row not in session:
            row = session.merge(row)
        session.delete(row)
        session.commit()
    except IntegrityError as error:
        session.rollback()
        raise ValidationError(type(row).__name__, None, f"{row_name(row)} is still referenced: {error.orig}") from None
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
