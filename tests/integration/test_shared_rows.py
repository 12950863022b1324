"""Rows several inventories find at once (inventory/rows.py): every cluster's, on every replica, finds the
same Images."""

from __future__ import annotations

import threading
import uuid

import sqlalchemy as sa

from kuberaven.inventory.rows import find_or_insert_shared
from kuberaven.model import Database, Image
from kuberaven.model.base import table_of
from kuberaven.testing.postgres import PostgresServer

KEY = {"name": "registry.local:5000/shop/web", "tag": "1.0", "digest": ""}


def test_two_transactions_adding_the_same_image_share_one_row(postgres: PostgresServer) -> None:
    """The second waits for the first to commit and takes its row, instead of failing its whole batch."""
    database = Database(postgres.create_database(f"t_{uuid.uuid4().hex[:12]}"))
    database.prepare()
    table = table_of(Image)
    second: list[int | BaseException] = []
    with database.engine.connect() as first:
        with first.begin():
            first_id = find_or_insert_shared(first, table, KEY, {"kind": "container"})

            def other_inventory() -> None:
                try:
                    with database.engine.begin() as db:
                        second.append(find_or_insert_shared(db, table, KEY, {"kind": "container"}))
                except BaseException as error:  # reported to the test's thread below
                    second.append(error)

            racer = threading.Thread(target=other_inventory)
            racer.start()
            racer.join(1)
            assert racer.is_alive(), "the second insert waits for the first transaction"
        racer.join(10)
    assert second == [first_id]
    with database.engine.connect() as db:
        assert db.execute(sa.select(sa.func.count()).select_from(table)).scalar_one() == 1
    database.dispose()
