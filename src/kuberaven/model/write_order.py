"""One writer at a time per SQLite file of this process, each woken in turn (model/, under database.py).

    the inventory's batches, the relay's "sent" marks,  ──► OrderedConnection (every sqlite3 connection
    the network translator's threads, watch positions,       of a Database: the DBAPI's ``factory``)
    the API, the CLI: any statement that writes               ──► the file's WriteTurn, taken before the
                                                                  transaction's first write, given back when
                                                                  it ends (COMMIT, ROLLBACK, close)

SQLite lets one transaction write at a time. A connection that finds the
file locked waits in SQLite's busy handler, which sleeps and tries again
(1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms, then 100 ms): it is not
woken when the lock is free, so with several writer threads in one process
each contended transaction lost up to tens of milliseconds asleep beside a
free lock. Within the process, writers therefore queue on a lock of their
own (first come, first served) and are woken the moment the previous
writer's transaction ends. Other processes on the same file still meet
SQLite's busy handler (the engine's ``timeout``); PostgreSQL locks rows and
has none of this (its engines do not use this module).

The turn is held over the same span as SQLite's write lock (from the first
write to the end of the transaction), so it can deadlock nowhere SQLite
would not: a thread that holds it may take it again (a second connection of
the same thread then meets SQLite's own lock). Waiting for it is
bounded by the connection's busy timeout and fails as SQLite does
("database is locked"). A turn is given back when the transaction ends by
any path: commit(), rollback(), close(), a statement after which no
transaction is open (autocommit, a failed BEGIN, SQLite rolling back by
itself on a full disk), or the connection being collected.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, urlsplit

# Statements that take SQLite's write lock, so a turn (DDL too: migrations on a file the daemon writes).
WRITES = re.compile(r"\s*(?:INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|BEGIN\s+(?:IMMEDIATE|EXCLUSIVE))\b", re.I)
DEFAULT_TIMEOUT = 5.0  # seconds: sqlite3.connect()'s own default, when the engine gives none
MEMORY = ":memory:"


class WriteTurn:
    """The turn to write one database file, handed from writer to writer in the order they asked.

    Handed over, not released: the writer that gives it names the next (the first waiting), so a writer
    that asks again at once queues behind those already waiting instead of taking it back before they
    wake. Reentrant for the thread that holds it; given back from any thread (a connection may be closed
    by another thread than the one that wrote, e.g. the garbage collector's).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the fields below, never held while waiting
        self._owner: int | None = None
        self._depth = 0
        self._waiting: deque[tuple[int, threading.Lock]] = deque()

    def take(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the turn; whether this thread has it now."""
        me = threading.get_ident()
        with self._lock:
            if self._owner == me:
                self._depth += 1
                return True
            if self._owner is None:
                self._owner, self._depth = me, 1
                return True
            wake = threading.Lock()
            wake.acquire()
            self._waiting.append((me, wake))
        if wake.acquire(timeout=timeout):
            return True  # give() made this thread the owner before waking it
        with self._lock:
            if self._owner == me:
                return True  # handed over just as the wait ended
            self._waiting.remove((me, wake))
            return False

    def give(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth > 0:
                return
            if self._waiting:
                self._owner, wake = self._waiting.popleft()
                self._depth = 1
                wake.release()
            else:
                self._owner, self._depth = None, 0

    @property
    def held(self) -> bool:
        """Whether some thread holds the turn (tests, diagnostics)."""
        return self._owner is not None


_turns: dict[str, WriteTurn] = {}
_turns_lock = threading.Lock()
# A child made by fork() starts with no writer: the threads that held turns are not in it.
os.register_at_fork(after_in_child=_turns.clear)


def turn_for(database: str | os.PathLike[str]) -> WriteTurn | None:
    """The process's turn for a database file as sqlite3.connect() names it; None for an in-memory database
    (each connection has its own)."""
    path = _file_of(os.fspath(database))
    if path is None:
        return None
    with _turns_lock:
        return _turns.setdefault(path, WriteTurn())


def _file_of(name: str) -> str | None:
    if name.startswith("file:"):  # a URI (uri=True): file:path?mode=memory&...
        parts = urlsplit(name)
        if parse_qs(parts.query).get("mode") == ["memory"]:
            return None
        name = parts.path
    if name in ("", MEMORY):
        return None
    return os.path.normcase(os.path.realpath(name))


class OrderedConnection(sqlite3.Connection):
    """A sqlite3 connection whose writing transactions take the file's turn first (the Database's SQLite
    engines make every connection with it: ``connect_args={"factory": OrderedConnection}``)."""

    def __init__(self, database: str | os.PathLike[str], timeout: float = DEFAULT_TIMEOUT, *args: Any, **kw: Any):
        self._holds = False  # first: __del__ runs even when opening the file fails
        self._turn = turn_for(database)
        self._wait = timeout
        super().__init__(database, timeout, *args, **kw)

    # One signature for typeshed's two overloads (with and without a factory).
    def cursor(self, factory: Callable[[sqlite3.Connection], sqlite3.Cursor] | None = None) -> sqlite3.Cursor:  # type: ignore[override]
        return super().cursor(factory or OrderedCursor)

    # The shortcuts make their cursor without cursor(): through it, so that they take turns too.
    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> sqlite3.Cursor:
        return self.cursor().executemany(sql, seq_of_parameters)

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        return self.cursor().executescript(sql_script)

    def before(self, statement: str, *, writes: bool = False) -> None:
        """Take the turn before a transaction's first write (called by the cursor); ``writes``: whatever
        ``statement`` says (a script)."""
        if self._holds or self._turn is None or not (writes or WRITES.match(statement)):
            return
        if not self._turn.take(self._wait):
            raise sqlite3.OperationalError(f"database is locked (another writer of this process for {self._wait}s)")
        self._holds = True

    def after(self) -> None:
        """A statement ran (or failed): no transaction open, no turn kept."""
        if self._holds and not self.in_transaction:
            self._give()

    def _give(self) -> None:
        if self._holds and self._turn is not None:
            self._holds = False
            self._turn.give()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._give()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._give()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._give()

    def __del__(self) -> None:
        self._give()  # collected unclosed: SQLite's lock goes with it, so does the turn


class OrderedCursor(sqlite3.Cursor):
    """The cursor of an OrderedConnection: a writing statement waits for the file's turn."""

    def __init__(self, connection: sqlite3.Connection, /) -> None:
        if not isinstance(connection, OrderedConnection):
            raise TypeError(f"an OrderedCursor needs an OrderedConnection, not {type(connection).__name__}")
        super().__init__(connection)
        self._ordered = connection

    def execute(self, sql: str, parameters: Any = (), /) -> OrderedCursor:
        self._ordered.before(sql)
        try:
            return super().execute(sql, parameters)
        finally:
            self._ordered.after()

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> OrderedCursor:
        self._ordered.before(sql)
        try:
            return super().executemany(sql, seq_of_parameters)
        finally:
            self._ordered.after()

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        self._ordered.before(sql_script, writes=True)  # a script may write anywhere in it
        try:
            return super().executescript(sql_script)
        finally:
            self._ordered.after()
