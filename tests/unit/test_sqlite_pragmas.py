"""model/database.py: every SQLite connection of the pool gets the daemon's pragmas, its page cache bounded."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from kuberaven.model.database import SQLITE_CACHE_KIB, Database


def test_each_pooled_connection_has_the_pragmas(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path / 'pragmas.db'}")
    try:
        with database.engine.connect() as first, database.engine.connect() as second:  # two pooled connections
            for db in (first, second):
                assert db.execute(sa.text("PRAGMA cache_size")).scalar() == -SQLITE_CACHE_KIB
                assert db.execute(sa.text("PRAGMA journal_mode")).scalar() == "wal"
                assert db.execute(sa.text("PRAGMA foreign_keys")).scalar() == 1
    finally:
        database.engine.dispose()


def test_a_plain_sqlite_connection_keeps_the_default() -> None:
    # The control: SQLite's own default is 2 MiB (-2000), so the pragma above is what bounds it.
    engine = sa.create_engine("sqlite://")
    with engine.connect() as db:
        assert db.execute(sa.text("PRAGMA cache_size")).scalar() == -2000
    engine.dispose()
