"""The one way to the database (model/): engine, sessions, schema upgrades, bootstrap.

The Python API, the CLI, the REST API and the daemon all use one
:class:`Database`. SQLite (the embedded default) runs in WAL mode with
foreign keys on; PostgreSQL runs from the same models. The schema is
Alembic's (``kuberaven db upgrade``); ``connect()`` brings it up to date and
runs the first-run bootstrap, so a script needs nothing more than::

    from kuberaven.model import *
    connect()   # KUBERAVEN_DB, else the per-user default_url(); or connect("sqlite:///./kuberaven.db")
"""

from __future__ import annotations

import ast
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import ORMExecuteState, Session, scoped_session, sessionmaker

from . import base, registry
from .base import integrity_error, row_name, store  # noqa: F401  (the Python API's, re-exported)
from .bootstrap import bootstrap
from .deletes import remove  # noqa: F401  (the Python API's, re-exported)
from .errors import DatabaseUnavailable, DatabaseURLError
from .write_order import OrderedConnection

log = logging.getLogger(__name__)

URL_ENV = "KUBERAVEN_DB"  # the same variable the daemon's settings read
EXAMPLE_URL = "sqlite:///./kuberaven.db"
DATABASE_FILE = "kuberaven.db"
MIGRATIONS = Path(__file__).parent / "migrations"
# How PostgreSQL (SQLSTATE 53100) and SQLite say that the disk is full.
DISK_FULL_SQLSTATE = "53100"
SQLITE_TIMEOUT = 30.0  # seconds a writer waits for another before "database is locked"
DISK_FULL_TEXTS = ("database or disk is full", "no space left on device", "could not extend file")


def _as_of(model: type[base.Model], at: Any) -> Any:
    """``Model.objects.at(time)``: asof.py is imported on first use, and with it history.py's tables (built at
    import, about 20 ms and 40 tables of metadata) that a process never asking about the past does without."""
    from .asof import AsOfQuerySet

    return AsOfQuerySet(model, at)


base.bind_as_of(_as_of)


def user_data_dir() -> Path:
    """kuberaven's per-user data directory: $XDG_DATA_HOME/kuberaven, else ~/.local/share/kuberaven."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kuberaven"


def default_url() -> str:
    """The database when none is named: one per user, wherever the command runs (not ./kuberaven.db)."""
    directory = user_data_dir()
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{directory / DATABASE_FILE}"


class Database:
    """An engine and its session factory; thread-safe."""

    def __init__(self, url: str | None = None, **engine_options: Any) -> None:
        self.url, self.engine = _engine(url or default_url(), engine_options)
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._write_problem: str | None = None
        # Held by a transaction of this process from its outbox INSERT to its COMMIT (inventory/writer.py).
        # PostgreSQL draws a row's id at INSERT: two writers (clusters) that committed in the other order
        # would make the first one's rows appear below the relay's cursor, which finds such rows only at
        # its next look (events/relay.py), seconds later. In turn, a process's outbox rows become visible
        # in id order.
        self.outbox_turn = threading.Lock()
        event.listen(self.engine, "handle_error", self._on_error)
        event.listen(self.engine, "before_cursor_execute", _note_write)
        event.listen(self.engine, "commit", self._on_commit)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.thread_session = scoped_session(self.sessions)
        self._change_listeners: list[Callable[[], None]] = []
        event.listen(self.sessions, "after_flush", _note_flushed_change)
        event.listen(self.sessions, "do_orm_execute", _note_executed_change)
        event.listen(self.sessions, "after_commit", self._after_commit)
        event.listen(self.sessions, "after_rollback", lambda session: session.info.pop(_CHANGED, None))

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose transaction commits on success and rolls back on error."""
        with self.sessions() as session, session.begin():
            yield session

    def upgrade(self, revision: str = "heads") -> None:
        """Bring the schema (kuberaven's and every plugin's branch) to ``revision`` (idempotent).

        At the heads already: nothing to do. An empty database at the heads: made in one step (schema.py).
        Anything else: Alembic's migrations (≈10 MiB once imported, so only then).
        """
        locations = [MIGRATIONS / "versions", *registry.migration_locations()]
        heads = script_heads(locations) if revision == "heads" else None
        try:
            if heads is not None and (self._at_heads(heads) or self._create_fresh(heads)):
                return
        except OperationalError as error:
            raise self._unavailable(error) from None
        self._alembic("upgrade", revision, locations)

    def _create_fresh(self, heads: set[str]) -> bool:
        from . import schema  # every table module: only for a database that is not at the heads already

        return schema.create_fresh(self.engine, heads)

    def downgrade(self, revision: str) -> None:
        """Take the schema back to ``revision`` (tests of migrations; operators use backups)."""
        self._alembic("downgrade", revision, [MIGRATIONS / "versions", *registry.migration_locations()])

    def _alembic(self, direction: str, revision: str, locations: list[Path]) -> None:
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.set_main_option("path_separator", "os")
        config.set_main_option("version_locations", os.pathsep.join(str(p) for p in locations))
        step = command.upgrade if direction == "upgrade" else command.downgrade
        try:
            with self.engine.begin() as connection:
                config.attributes["connection"] = connection
                step(config, revision)
        except OperationalError as error:
            raise self._unavailable(error) from None

    def _unavailable(self, error: OperationalError) -> DatabaseUnavailable:
        return DatabaseUnavailable(f"cannot open database {self.url.render_as_string()}: {error.orig}")

    def _at_heads(self, heads: set[str]) -> bool:
        """Whether the database's Alembic revisions are ``heads`` (a cheap look; False when unsure)."""
        try:
            with self.engine.connect() as connection:
                stored = connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalars()
                return set(stored) == heads
        except sa.exc.DBAPIError:  # no alembic_version table yet, or the database cannot be read: let Alembic say
            return False

    def prepare(self, cluster_kubeconfig: str | None = None, cluster_context: str | None = None) -> None:
        """Upgrade the schema and run the first-run bootstrap."""
        self.upgrade()
        with self.engine.begin() as connection:
            bootstrap(connection, kubeconfig=cluster_kubeconfig, context=cluster_context)

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` (from the committing thread) after a session of this Database commits a change
        to a managed row; returns the function that removes it. The sync loop wakes on it (SQLite has no NOTIFY)."""
        self._change_listeners.append(listener)
        return lambda: self._change_listeners.remove(listener)

    def _after_commit(self, session: Session) -> None:
        if session.info.pop(_CHANGED, False):
            for listener in list(self._change_listeners):
                listener()

    def write_problem(self) -> str | None:
        """Why writes fail now (the disk is full), or None; /readyz reports it. Cleared by the next committed write."""
        return self._write_problem

    def _on_error(self, context: sa.engine.ExceptionContext) -> None:
        if is_disk_full(context.original_exception):
            if self._write_problem is None:
                log.error("database %s: the disk is full: %s", self.url.render_as_string(), context.original_exception)
            self._write_problem = f"disk full: {context.original_exception}"

    def _on_commit(self, connection: sa.Connection) -> None:
        # Before the COMMIT itself: if that fails, handle_error runs after and sets the problem again.
        if connection.info.pop(_WROTE, False) and self._write_problem is not None:
            log.info("database %s: writes succeed again", self.url.render_as_string())
            self._write_problem = None

    def dispose(self) -> None:
        self.thread_session.remove()
        self.engine.dispose()


def _engine(text: str, given: dict[str, Any]) -> tuple[sa.URL, sa.Engine]:
    """The URL and its engine, or DatabaseURLError naming the problem (never an ImportError from a driver)."""
    try:
        url = sa.make_url(_normalise(text))
    except sa.exc.ArgumentError:
        raise DatabaseURLError(f"database URL {text!r} is not a URL (for example {EXAMPLE_URL})") from None
    try:
        return url, sa.create_engine(url, **_engine_options(url, given))
    except (sa.exc.ArgumentError, ImportError):
        raise DatabaseURLError(
            f"database URL {url.render_as_string()}: {url.drivername!r} is not supported; use sqlite:// or postgresql://"
        ) from None


def _normalise(url: str) -> str:
    # "postgresql://" means psycopg 3 here (the driver we install), not psycopg2.
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _engine_options(url: sa.URL, given: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if url.get_backend_name() == "sqlite":
        # Writers wait for each other rather than failing at once: those of this process in turn
        # (write_order.py), those of other processes in SQLite's busy handler.
        options["connect_args"] = {"timeout": SQLITE_TIMEOUT, "factory": OrderedConnection}
    else:
        options["pool_pre_ping"] = True
    connect_args = {**options.get("connect_args", {}), **given.get("connect_args", {})}
    options.update(given)
    if connect_args:
        options["connect_args"] = connect_args
    return options


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def script_heads(locations: list[Path]) -> set[str] | None:
    """The head revisions of the migration scripts, read from their source without importing Alembic.

    None when a script does not state ``revision``/``down_revision`` as literals
    (then Alembic decides).
    """
    revisions: set[str] = set()
    parents: set[str] = set()
    for directory in locations:
        for path in Path(directory).glob("*.py"):
            if path.name.startswith("__"):
                continue  # __init__.py: Alembic skips it too
            values = _literal_assignments(path, ("revision", "down_revision"))
            if not isinstance(values.get("revision"), str):
                return None
            revisions.add(values["revision"])
            down = values.get("down_revision")
            parents.update(down if isinstance(down, tuple | list) else [down] if down else [])
    return revisions - parents


def _literal_assignments(path: Path, names: tuple[str, ...]) -> dict[str, Any]:
    """The literal values of the module-level assignments to ``names`` ({} when one is not a literal).

    Parsing a whole migration script is most of a quick command's schema check: the lines that assign the
    names are parsed alone first, the whole file only when they do not parse (an assignment over several lines).
    """
    text = path.read_text()
    lines = re.compile(rf"^(?:{'|'.join(map(re.escape, names))})\b[^=\n]*=.*$", re.MULTILINE)
    try:
        found = _assignments(ast.parse("\n".join(m.group(0) for m in lines.finditer(text))), names)
    except SyntaxError:
        found = None
    return found if found is not None and set(names) <= found.keys() else _assignments(ast.parse(text), names) or {}


def _assignments(tree: ast.Module, names: tuple[str, ...]) -> dict[str, Any] | None:
    """The literal values assigned to ``names`` in ``tree``'s body; None when one is not a literal."""
    found: dict[str, Any] = {}
    target: ast.expr
    for node in tree.body:
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in names and value is not None:
            try:
                found[target.id] = ast.literal_eval(value)
            except ValueError:
                return None
    return found


_WROTE = "kuberaven_wrote"
_CHANGED = "kuberaven_changed"


def _note_flushed_change(session: Session, _context: Any) -> None:
    rows = [*session.new, *session.dirty]
    if session.deleted or any(isinstance(r, base.Bookkeeping) and r.xos_managed for r in rows):
        session.info[_CHANGED] = True


def _note_executed_change(state: ORMExecuteState) -> None:
    if state.is_insert or state.is_update or state.is_delete:
        session_info = state.session.info
        session_info[_CHANGED] = True


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
    """Make ``url`` (default: KUBERAVEN_DB, else default_url()) the database of ``Model.objects``."""
    global _current
    registry.load()  # the plugins' models and migrations
    database = Database(url or os.environ.get(URL_ENV) or default_url())
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
