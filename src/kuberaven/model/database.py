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
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, scoped_session, sessionmaker

from . import base, registry
from .base import integrity_error, remove, row_name, store  # noqa: F401  (the Python API's, re-exported)
from .bootstrap import bootstrap
from .errors import DatabaseUnavailable

log = logging.getLogger(__name__)

DEFAULT_URL = "sqlite:///./kuberaven.db"
URL_ENV = "KUBERAVEN_DB"  # the same variable the daemon's settings read
MIGRATIONS = Path(__file__).parent / "migrations"
# How PostgreSQL (SQLSTATE 53100) and SQLite say that the disk is full.
DISK_FULL_SQLSTATE = "53100"
DISK_FULL_TEXTS = ("database or disk is full", "no space left on device", "could not extend file")


class Database:
    """An engine and its session factory; thread-safe."""

    def __init__(self, url: str = DEFAULT_URL, **engine_options: Any) -> None:
        self.url = sa.make_url(_normalise(url))
        self.engine = sa.create_engine(self.url, **_engine_options(self.url, engine_options))
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._write_problem: str | None = None
        event.listen(self.engine, "handle_error", self._on_error)
        event.listen(self.engine, "before_cursor_execute", _note_write)
        event.listen(self.engine, "commit", self._on_commit)
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

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        locations = [MIGRATIONS / "versions", *registry.migration_locations()]
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
        self.upgrade()
        with self.session() as session:
            bootstrap(session, kubeconfig=cluster_kubeconfig, context=cluster_context)

    def write_problem(self) -> str | None:
        """Why writes fail now (the disk is full), or None; /readyz reports it. Cleared by the next committed write."""
        return self._write_problem

    def _on_error(self, context: sa.engine.ExceptionContext) -> None:
        if is_disk_full(context.original_exception):
            if self._write_problem is None:
                log.error("database %s: the disk is full: %s", self.url.render_as_string(),
                          context.original_exception)  # fmt: skip
            self._write_problem = f"disk full: {context.original_exception}"

    def _on_commit(self, connection: sa.Connection) -> None:
        # Before the COMMIT itself: if that fails, handle_error runs after and sets the problem again.
        if connection.info.pop(_WROTE, False) and self._write_problem is not None:
            log.info("database %s: writes succeed again", self.url.render_as_string())
            self._write_problem = None

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


_WROTE = "kuberaven_wrote"


def _note_write(connection: sa.Connection, _cursor: Any, statement: str, *_: Any) -> None:
    if statement.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE"):
        connection.info[_WROTE] = True


def is_disk_full(error: BaseException) -> bool:
    """Whether a DBAPI error says that the disk (or SQLite's size limit) is full."""
    if getattr(error, "sqlstate", None) == DISK_FULL_SQLSTATE:
        return True
    text = str(error).lower()
    return any(marker in text for marker in DISK_FULL_TEXTS)


_current: Database | None = None
_current_lock = threading.RLock()


def connect(url: str | None = None, *, prepare: bool = True) -> Database:
    """Make ``url`` (default: KUBERAVEN_DB or sqlite:///./kuberaven.db) the database of ``Model.objects``."""
    global _current
    registry.load()  # the plugins' models and migrations
    database = Database(url or os.environ.get(URL_ENV) or DEFAULT_URL)
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


base.bind_session(current_session)


