"""Writers of one process on one database (model/write_order.py), on real SQLite and PostgreSQL.

What users rely on: two threads (or two Database objects) of one process writing the same SQLite file at once
do not fail with "database is locked"; the one that waits writes as soon as the other's transaction ends,
in the order they came; a transaction that ends by a rollback, an error or a full disk lets the next writer
in; a writer that waits longer than the busy timeout fails as SQLite does. PostgreSQL is left to its row locks.
"""

from __future__ import annotations

import gc
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from kuberaven.model import Database
from kuberaven.model.write_order import OrderedConnection, WriteTurn, turn_for
from kuberaven.testing.postgres import PostgresServer

TABLE = "write_order_probe"
HOLD = 0.3  # seconds a writer keeps its transaction open while others queue


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "order.db"
    first = Database(f"sqlite:///{path}")
    with first.engine.begin() as db:
        db.execute(sa.text(f"CREATE TABLE {TABLE} (n INTEGER, who TEXT)"))
    first.dispose()
    yield path


def _database(path: Path, timeout: float = 30.0) -> Database:
    return Database(f"sqlite:///{path}", connect_args={"timeout": timeout})


def _insert(database: Database, who: str, *, hold: float = 0.0, fail: bool = False) -> None:
    """One transaction: a row numbered after those committed before it; held open ``hold`` seconds."""
    with database.engine.begin() as db:
        db.execute(sa.text(f"INSERT INTO {TABLE} SELECT count(*), :who FROM {TABLE}"), {"who": who})
        time.sleep(hold)
        if fail:
            raise RuntimeError(f"{who} gives up")


def _rows(database: Database) -> list[tuple[int, str]]:
    with database.engine.connect() as db:
        return [(n, who) for n, who in db.execute(sa.text(f"SELECT n, who FROM {TABLE} ORDER BY n"))]


def _until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.005)


def _queued(turn: WriteTurn) -> int:
    return len(turn._waiting)  # how many writers wait for it now (to queue them in a known order)


def test_writers_of_one_process_wait_their_turn_in_order_and_none_fails(sqlite_file: Path) -> None:
    # Two Database objects on one file (as the daemon and a plugin's own connect() may have), a short busy
    # timeout: SQLite's handler alone would poll; the writers queue and each gets in as the previous commits.
    first, second = _database(sqlite_file, timeout=5), _database(sqlite_file, timeout=5)
    turn = turn_for(sqlite_file)
    assert turn is not None
    try:
        with ThreadPoolExecutor(4) as pool:
            holder = pool.submit(_insert, first, "a", hold=HOLD)
            _until(lambda: turn.held)
            queued: list[Future[None]] = []
            for who, database in (("b", second), ("c", first), ("d", second)):
                queued.append(pool.submit(_insert, database, who))
                _until(lambda: _queued(turn) == len(queued))  # queued: the next one asks after it
            for future in (holder, *queued):
                future.result()  # none raised "database is locked"
        assert _rows(first) == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]
        assert not turn.held
    finally:
        first.dispose()
        second.dispose()


def test_a_rollback_or_an_error_gives_the_turn_to_the_next_writer(sqlite_file: Path) -> None:
    database = _database(sqlite_file, timeout=1)
    turn = turn_for(sqlite_file)
    assert turn is not None
    try:
        with pytest.raises(RuntimeError, match="gives up"):
            _insert(database, "rolled back", fail=True)
        assert not turn.held
        # A statement that fails inside a transaction that wrote:
        with pytest.raises(sa.exc.IntegrityError), database.engine.begin() as db:
            db.execute(sa.text(f"INSERT INTO {TABLE} VALUES (0, 'kept until the error')"))
            db.execute(sa.text("CREATE UNIQUE INDEX one_n ON write_order_probe (n)"))
            db.execute(sa.text(f"INSERT INTO {TABLE} VALUES (0, 'the same n')"))
        assert not turn.held
        with ThreadPoolExecutor(1) as pool:  # another thread: with the turn kept, it would time out in 1 s
            pool.submit(_insert, database, "next").result()
        assert _rows(database) == [(0, "next")]
    finally:
        database.dispose()


def test_a_writer_that_waits_longer_than_the_busy_timeout_fails_as_sqlite_does(sqlite_file: Path) -> None:
    patient, hasty = _database(sqlite_file), _database(sqlite_file, timeout=0.2)
    try:
        with ThreadPoolExecutor(1) as pool:
            holder = pool.submit(_insert, patient, "slow", hold=1.0)
            _until(lambda: turn_for(sqlite_file).held)  # type: ignore[union-attr]  # a file: never None
            with pytest.raises(sa.exc.OperationalError, match="database is locked"):
                _insert(hasty, "too early")
            holder.result()
        _insert(hasty, "later")  # the timed-out wait left nothing behind
        assert [who for _, who in _rows(patient)] == ["slow", "later"]
    finally:
        patient.dispose()
        hasty.dispose()


def test_a_full_disk_gives_the_turn_back(sqlite_file: Path) -> None:
    database = _database(sqlite_file, timeout=1)
    with database.engine.connect() as db:
        pages = db.execute(sa.text("PRAGMA page_count")).scalar_one()

    def limit(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages + 1}")

    sa.event.listen(database.engine, "connect", limit)
    database.engine.dispose()
    try:
        with pytest.raises(sa.exc.OperationalError, match="database or disk is full"), database.engine.begin() as db:
            db.execute(
                sa.text(f"INSERT INTO {TABLE} VALUES (:n, :who)"), [{"n": n, "who": "x" * 500} for n in range(50)]
            )
        assert not turn_for(sqlite_file).held  # type: ignore[union-attr]  # a file: never None
        sa.event.remove(database.engine, "connect", limit)
        database.engine.dispose()
        with ThreadPoolExecutor(1) as pool:
            pool.submit(_insert, database, "after the disk was freed").result()
    finally:
        database.dispose()


def test_a_writer_may_read_and_write_elsewhere_while_it_holds_the_turn(sqlite_file: Path, tmp_path: Path) -> None:
    database, other_file = _database(sqlite_file, timeout=1), _database(tmp_path / "other.db", timeout=1)
    try:
        with database.engine.begin() as db:
            db.execute(sa.text(f"INSERT INTO {TABLE} VALUES (0, 'holder')"))
            assert _rows(database) == []  # a second connection of the same thread reads: no deadlock
            with other_file.engine.begin() as other:  # another file: another turn
                other.execute(sa.text("CREATE TABLE elsewhere (x INTEGER)"))
                other.execute(sa.text("INSERT INTO elsewhere VALUES (1)"))
        assert _rows(database) == [(0, "holder")]
    finally:
        database.dispose()
        other_file.dispose()


def test_a_connection_closed_or_dropped_in_a_transaction_gives_the_turn_back(sqlite_file: Path) -> None:
    turn = turn_for(sqlite_file)
    assert turn is not None
    connection = sqlite3.connect(sqlite_file, factory=OrderedConnection)
    connection.execute(f"INSERT INTO {TABLE} VALUES (0, 'never committed')")
    assert turn.held and connection.in_transaction
    connection.close()
    assert not turn.held
    dropped = sqlite3.connect(sqlite_file, factory=OrderedConnection)
    dropped.executemany(f"INSERT INTO {TABLE} VALUES (?, ?)", [(0, "dropped")])
    assert turn.held
    del dropped
    gc.collect()  # sqlite3's statement cache refers back to its connection: a cycle, for the collector
    assert not turn.held
    autocommit = sqlite3.connect(sqlite_file, factory=OrderedConnection, isolation_level=None)
    autocommit.execute(f"INSERT INTO {TABLE} VALUES (0, 'autocommitted')")
    assert not turn.held and not autocommit.in_transaction  # its own transaction ended with the statement
    autocommit.close()


def test_in_memory_databases_have_no_turn() -> None:
    assert turn_for(":memory:") is None
    assert turn_for("file:scratch?mode=memory&cache=shared") is None
    assert turn_for("file:/tmp/x.db?mode=ro") is turn_for("/tmp/x.db")


def test_postgresql_writers_are_left_to_its_own_locks(postgres: PostgresServer) -> None:
    database = Database(postgres.create_database(f"t_{uuid.uuid4().hex[:12]}"))
    try:
        with database.engine.begin() as db:
            db.execute(sa.text(f"CREATE TABLE {TABLE} (n INTEGER, who TEXT)"))
            assert not isinstance(db.connection.dbapi_connection, OrderedConnection)
        started = threading.Barrier(2)

        def write(who: str) -> None:
            with database.engine.begin() as db:
                db.execute(sa.text(f"INSERT INTO {TABLE} VALUES (0, :who)"), {"who": who})
                started.wait(5)  # both transactions are open and have written at once: no turn between them

        with ThreadPoolExecutor(2) as pool:
            for future in [pool.submit(write, "a"), pool.submit(write, "b")]:
                future.result()
        assert sorted(who for _, who in _rows(database)) == ["a", "b"]
    finally:
        database.dispose()
