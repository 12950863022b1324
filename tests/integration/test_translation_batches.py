"""The translation state's batch queries (network/state.py, backends/embedded_ports.py) on SQLite and PostgreSQL.

A list given to in_() is a value of its statement, and SQLAlchemy's caches of
compiled statements kept such lists alive: every pod's uid or address of a
cold start's batches, after the batches were done (issue 26's sixth round).
The batches' lists are given at execution instead; these tests check both the
answers and that no statement holds a batch's list afterwards.
"""

from __future__ import annotations

import gc
import uuid
from typing import Any

import sqlalchemy as sa

from kuberaven.model import Database
from kuberaven.network.backends.embedded_ports import _existing_ports, _held
from kuberaven.network.drivers.ports import PortRequest
from kuberaven.network.state import TranslationStore

BATCHES, BATCH = 6, 256  # a cold start's port batches, in small


class Backend:
    """What TranslationStore reads of its backend in these calls: its name."""

    name = "embedded"


BACKEND: Any = Backend()


def lists_held_by_statements(values: set[str]) -> int:
    """How many bound parameters alive hold a list with one of ``values``."""
    gc.collect()
    return sum(
        1
        for obj in gc.get_objects()
        if isinstance(obj, sa.sql.elements.BindParameter)
        and isinstance(obj.value, list)
        and any(isinstance(v, str) and v in values for v in obj.value)
    )


def test_batches_of_states_are_answered_and_their_uids_not_kept(database: Database) -> None:
    store = TranslationStore(database, "c1", BACKEND)
    given: set[str] = set()
    for batch in range(BATCHES):
        uids = [str(uuid.uuid4()) for _ in range(BATCH)]
        given.update(uids)
        assert store.states("Pod", uids) == {}  # none saved yet
        store.save_many([("Pod", uid, "ns", f"p-{batch}-{i}", {"port": str(i)}) for i, uid in enumerate(uids)])
        store.save_many([("Pod", uids[0], "ns", f"p-{batch}-0", {"port": "again"})])  # an existing row: updated
        states = store.states("Pod", uids)
        assert len(states) == BATCH and states[uids[0]] == {"port": "again"} and states[uids[1]] == {"port": "1"}
        assert store.states("Namespace", uids) == {}  # another kind: the kind is still compared
        assert TranslationStore(database, "c2", BACKEND).states("Pod", uids) == {}  # and the cluster
    assert lists_held_by_statements(given) == 0


def test_the_embedded_backends_port_lookups_keep_no_batch(database: Database) -> None:
    given: set[str] = set()
    with database.engine.connect() as db:
        for _ in range(BATCHES):
            requests = [
                PortRequest(
                    "1", "1", f"ns/p-{uuid.uuid4().hex}", str(uuid.uuid4()), f"10.{i // 250}.0.{i % 250}", [], []
                )
                for i in range(BATCH)
            ]
            given.update(r.name for r in requests)
            given.update(r.address for r in requests if r.address)
            assert _existing_ports(db, requests) == {}  # nothing made: nothing found, by name
            assert _held(db, requests) == set()  # no address held
    assert lists_held_by_statements(given) == 0
