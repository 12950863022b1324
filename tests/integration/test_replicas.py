"""Replicas sharing one PostgreSQL: the outbox relay publishes from one replica at a time (events/publisher.py)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuberaven.events.relay import OutboxRelay, RelayOptions
from kuberaven.model import Database, OutboxEvent
from kuberaven.testing.broker import Broker, kafka_messages
from kuberaven.testing.postgres import PostgresServer
from tests.helpers import eventually


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    server = Broker(tmp_path / "broker")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _write(database: Database, keys: list[str], rounds: range) -> list[OutboxEvent]:
    events = [OutboxEvent(event_id=str(uuid.uuid4()), cluster="kubernetes", key=key, status="updated",
                          payload={"key": key, "round": n}, created=time.time())
              for n in rounds for key in keys]  # fmt: skip
    with database.session() as session:
        session.add_all(events)
        session.commit()
    return events


def _sent(database: Database) -> int:
    with database.session() as session:
        return session.query(OutboxEvent).filter(OutboxEvent.sent.is_not(None)).count()


async def test_one_relay_publishes_at_a_time_and_the_other_takes_over_in_order(
    postgres: PostgresServer, broker: Broker
) -> None:
    database = Database(postgres.create_database(f"t_{uuid.uuid4().hex[:12]}"))
    database.prepare()
    options = RelayOptions(bootstrap=broker.bootstrap, topic=f"relay-{uuid.uuid4().hex[:8]}", idle_poll=0.1)
    relays = [OutboxRelay(database, options), OutboxRelay(database, options)]
    threads = [threading.Thread(target=relay.run, daemon=True) for relay in relays]
    keys = [f"ns/pod-{i}" for i in range(5)]
    try:
        for thread in threads:
            thread.start()
        first = _write(database, keys, range(20))
        await eventually(lambda: _assert(_sent(database) == len(first)), timeout=60)
        publishing = [relay.publishing for relay in relays]
        assert sorted(publishing) == [False, True], "exactly one relay publishes"
        holder = publishing.index(True)
        relays[holder].stop()
        threads[holder].join(30)
        second = _write(database, keys, range(20, 40))
        await eventually(lambda: _assert(_sent(database) == len(first) + len(second)), timeout=60)
        assert relays[1 - holder].publishing, "the standby took over"
    finally:
        for relay, thread in zip(relays, threads, strict=True):
            relay.stop()
            thread.join(30)
        database.dispose()
    events = first + second
    messages = kafka_messages(broker.bootstrap, options.topic, {e.event_id for e in events})
    seen: dict[str, list[int]] = {}
    for message in messages:  # per key, one partition: the order of first appearance is the publishing order
        payload = json.loads(message.value())
        rounds = seen.setdefault(payload["key"], [])
        if payload["round"] not in rounds:
            rounds.append(payload["round"])
    assert seen == {key: list(range(40)) for key in keys}


def _assert(condition: bool) -> None:
    assert condition
