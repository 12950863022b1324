"""Delivered outbox rows marked sent apart from producing (events/marks.py, events/relay.py), on real SQLite and
PostgreSQL and a real broker: while another connection keeps the rows from being written, the relay still
produces, counts the delivered-but-unmarked rows as in flight (never produced twice, ``max_in_flight`` holds) and
marks them once it can; a relay killed between delivery and mark re-sends and loses nothing."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import sqlalchemy as sa
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from kuberaven.events.marks import SentMarks
from kuberaven.events.options import RelayOptions
from kuberaven.model import Database, OutboxEvent
from kuberaven.testing.broker import Broker, kafka_messages
from tests.helpers import RelayThread, eventually, write_events

ROWS = 300


def _unsent(database: Database) -> int:
    query = sa.select(sa.func.count()).select_from(OutboxEvent).where(OutboxEvent.sent.is_(None))
    with database.session() as session:
        return int(session.execute(query).scalar_one())


def _read(bootstrap: str, topic: str, until: str | None = None, quiet: float = 2.0) -> list[str]:
    """The event ids on the topic's one partition, in order, repeats included: up to the event ``until``, or (None)
    until no message came for ``quiet`` seconds (for what must NOT arrive while something holds it back)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kuberaven-tests", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        found: list[str] = []
        last = time.monotonic()
        deadline = last + 60
        while time.monotonic() < deadline and (until is not None or time.monotonic() - last < quiet):
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            last = time.monotonic()
            found.append(json.loads(message.value() or b"{}")["event_id"])
            if found[-1] == until:
                return found
        assert until is None, f"{until} never reached {topic!r}"
        return found
    finally:
        consumer.close()


def _topic_exists(bootstrap: str, topic: str) -> bool:
    """Whether the relay created the topic (listing all topics: naming one would make the broker create it)."""
    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def _sentinel(database: Database) -> str:
    """One more event, written last: once read, everything produced before it (one partition) was read."""
    return write_events(database, "c", ["ns/sentinel"], range(1))[0].event_id


@contextlib.contextmanager
def rows_held(database: Database) -> Iterator[Callable[[], None]]:
    """Another connection in a transaction that wrote every outbox row: on SQLite it holds the file's write lock,
    on PostgreSQL the rows' locks; either way no mark can be written until it ends (rolled back: the function
    yielded, or the block's end)."""
    other = Database(database.url.render_as_string(hide_password=False))
    connection = other.engine.connect()
    try:
        connection.execute(sa.update(OutboxEvent).values(attempts=OutboxEvent.attempts))
        yield connection.rollback
    finally:
        connection.rollback()
        connection.close()
        other.dispose()


def _options(broker: Broker) -> RelayOptions:
    topic = f"marks-{uuid.uuid4().hex[:8]}"
    return RelayOptions(kafka=broker.bootstrap, topic=topic, kafka_partitions=1, idle_poll=0.1)


def _events(database: Database) -> list[OutboxEvent]:
    return sorted(
        write_events(database, "c", [f"ns/pod-{i}" for i in range(10)], range(ROWS // 10)), key=lambda e: e.id
    )


async def test_rows_are_produced_while_their_marks_wait_and_marked_once_the_lock_is_free(
    database: Database, broker: Broker
) -> None:
    events = _events(database)
    options = _options(broker)
    with rows_held(database) as release, RelayThread(database, options) as relay:
        await eventually(lambda: _assert(relay.topic_ready), timeout=30)
        messages = kafka_messages(broker.bootstrap, options.topic, {e.event_id for e in events})
        assert len(_read(broker.bootstrap, options.topic)) == ROWS, "delivered, not yet marked: not produced again"
        assert _unsent(database) == ROWS, "no mark while the rows are held"
        release()
        await eventually(lambda: _assert(_unsent(database) == 0), timeout=60)
        sentinel = _sentinel(database)
        found = _read(broker.bootstrap, options.topic, until=sentinel)
    assert Counter(found) == Counter({e.event_id: 1 for e in events} | {sentinel: 1}), "each row produced once"
    # The stored payload passed through as the value (the JSON text as written, not re-encoded).
    with database.engine.connect() as db:
        query = sa.select(OutboxEvent.event_id, sa.cast(OutboxEvent.payload, sa.Text))
        stored = {event_id: text for event_id, text in db.execute(query)}
    values = {dict(m.headers())["event_id"].decode(): m.value() for m in messages}
    assert values == {e.event_id: stored[e.event_id].encode() for e in events}


async def test_delivered_but_unmarked_rows_count_against_max_in_flight(database: Database, broker: Broker) -> None:
    events = _events(database)
    options = dataclasses.replace(_options(broker), max_in_flight=50, batch=50)
    with rows_held(database) as release, RelayThread(database, options) as relay:
        await eventually(lambda: _assert(relay.topic_ready), timeout=30)
        first = [e.event_id for e in events[:50]]
        kafka_messages(broker.bootstrap, options.topic, set(first))
        # No more for two seconds of relay steps: the 50 delivered wait for their marks, still in flight.
        assert _read(broker.bootstrap, options.topic) == first
        assert _unsent(database) == ROWS
        release()
        await eventually(lambda: _assert(_unsent(database) == 0), timeout=60)
        sentinel = _sentinel(database)
        found = _read(broker.bootstrap, options.topic, until=sentinel)
    assert found == [e.event_id for e in events] + [sentinel], "each row produced once, in order"


_RELAY = """
import sys
from kuberaven.events.options import RelayOptions
from kuberaven.events.relay import OutboxRelay
from kuberaven.model import Database
OutboxRelay(Database(sys.argv[1]), RelayOptions(kafka=sys.argv[2], topic=sys.argv[3], kafka_partitions=1)).run()
"""


def _start_relay(database: Database, options: RelayOptions, log: Path) -> subprocess.Popen[bytes]:
    """A relay in a process of its own (to be SIGKILLed); its output goes to ``log``."""
    url = database.url.render_as_string(hide_password=False)
    assert options.kafka is not None
    command = [sys.executable, "-c", _RELAY, url, options.kafka, options.topic]
    with log.open("wb") as sink:
        return subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=os.environ)


async def test_a_relay_killed_between_delivery_and_mark_sends_again_and_loses_nothing(
    database: Database, broker: Broker, tmp_path: Path
) -> None:
    events = _events(database)
    options = _options(broker)
    log = tmp_path / "relay.log"
    with rows_held(database):
        child = _start_relay(database, options, log)
        try:
            await eventually(lambda: _assert(_topic_exists(broker.bootstrap, options.topic)), timeout=60)
            kafka_messages(broker.bootstrap, options.topic, {e.event_id for e in events})
            child.send_signal(signal.SIGKILL)  # every row delivered, none marked
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
    assert _unsent(database) == ROWS, log.read_text()[-2000:]
    with RelayThread(database, options):
        await eventually(lambda: _assert(_unsent(database) == 0), timeout=60)
        sentinel = _sentinel(database)
        found = _read(broker.bootstrap, options.topic, until=sentinel)
    ids = [e.event_id for e in events]
    assert found == ids + ids + [sentinel], "every row sent again after the crash, in order, nothing lost"


def _sent(database: Database, ids: list[int]) -> set[int]:
    query = sa.select(OutboxEvent.id).where(OutboxEvent.id.in_(ids), OutboxEvent.sent.is_not(None))
    with database.session() as session:
        return set(session.scalars(query))


async def test_marks_wait_for_the_interval_unless_nothing_else_is_in_flight(database: Database) -> None:
    ids = [e.id for e in _events(database)]
    marks = SentMarks(database, interval=0.5)
    marks.start()
    try:
        marks.add(ids[:10], now=True)
        await eventually(lambda: _assert(_sent(database, ids) == set(ids[:10])), timeout=10)
        started = time.monotonic()
        marks.add(ids[10:20], now=False)  # within the interval of the last mark: waits for it
        await eventually(lambda: _assert(_sent(database, ids) == set(ids[:20])), timeout=10, interval=0.01)
        assert time.monotonic() - started >= 0.2
        marks.add(ids[20:30], now=False)
        marks.add(ids[30:40], now=True)  # the last delivery: everything due goes now, in one mark
        await eventually(lambda: _assert(_sent(database, ids) == set(ids[:40])), timeout=10)
        assert sorted(marks.take_marked()) == ids[:40]
        assert marks.marks <= 4, "the ids of one wait go in one mark"
        marks.add(ids[40:], now=False)
    finally:
        marks.close()
    assert _sent(database, ids) == set(ids), "close() marks what is due"
    assert sorted(marks.take_marked()) == ids[40:]


async def test_a_failed_mark_keeps_its_ids_and_is_tried_again(database: Database) -> None:
    ids = [e.id for e in _events(database)]
    marks = SentMarks(database)
    marks.start()
    try:
        with database.engine.begin() as db:  # the table gone for a while: every mark fails
            db.execute(sa.text("ALTER TABLE event_outbox RENAME TO event_outbox_away"))
        marks.add(ids[:3], now=True)
        await eventually(lambda: _assert(marks.last_error is not None and "event_outbox" in marks.last_error))
        assert marks.take_marked() == []
        with database.engine.begin() as db:
            db.execute(sa.text("ALTER TABLE event_outbox_away RENAME TO event_outbox"))
        await eventually(lambda: _assert(marks.last_error is None), timeout=30)
        assert sorted(marks.take_marked()) == ids[:3]
        assert _sent(database, ids) == set(ids[:3])
    finally:
        marks.close()


def _assert(condition: bool) -> None:
    assert condition
