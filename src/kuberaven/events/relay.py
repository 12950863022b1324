"""The outbox relay (events/): outbox rows → Kafka, at least once, in order per pod.

    inventory/ writer ──(same transaction as the rows)──► event_outbox ──► OutboxRelay ──► Kafka topic
                                                                       │ delivery report
                                                                       └──► SentMarks: row.sent = now

A row is marked sent only when Kafka acknowledged it (acks=all, idempotent
producer), so a crash at any point re-sends, never loses; consumers dedupe
on ``event_id``. The marks are written by a thread of their own (marks.py:
batched, at once when nothing else is in flight), so producing never waits
for the database's write lock; a delivered row stays in flight until it is
marked. The message value is the payload as stored (its JSON text, not
decoded and encoded again), except in CloudEvents' structured mode, which
wraps it. The key is ``namespace/name`` (or the pod name, setting
``event_key``): one pod's events land in one partition in outbox order. While the broker is down librdkafka keeps
retrying (no message timeout) and the relay stops reading more rows once
``max_in_flight`` wait, so a long outage costs memory bounded by that.

Rows are read in id order from a cursor (the highest id read). On
PostgreSQL ids come from a sequence taken at INSERT, not at COMMIT: a
writer whose transaction commits after another's can make a row appear
*below* the cursor. The writers of one process take turns from their
outbox INSERT to their COMMIT (Database.outbox_turn), so only a writer in
another process can. Every LOOK_INTERVAL the relay therefore lists the ids
of unsent rows at or below the cursor; any that is not in flight was
committed late, and the cursor moves back to it (rows in flight are
skipped when read again). That costs one id-only query of the unsent rows
(at most ``max_in_flight`` plus the late ones) every two seconds, and
delays a late row by at most that long; it needs no schema change and
keeps the cursor for the common case.

When the broker has not answered for a while (``unreachable_for()``),
events/component.py makes /readyz say so; the rows wait in the outbox.
A fatal producer error ends run() (RelayFailed) so that the supervisor
starts it again with a new producer.

On PostgreSQL every replica runs a relay. Without leader election only one
publishes at a time: the holder of the publisher lock (events/publisher.py,
which says why one publisher and not rows claimed per batch); the others
stand by. With leader election each publishes the clusters its replica owns,
one lock per cluster (events/scope.py decides which rows, each step). A
relay that loses its locks drops what it had queued; the next publisher of a
cluster starts from its oldest unsent row, so a handover repeats events
(consumers dedupe on ``event_id``) and loses none.

Sent rows are trimmed after ``retention`` seconds (by the marks' thread). With no Kafka configured
there is no relay: the outbox is the event log, trimmed by age the same way.

confluent-kafka is synchronous, so the relay runs in its own thread.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import TopicMetadata

from .. import metrics
from ..kube.backoff import Backoff
from ..model.base import table_of
from ..model.database import Database
from ..model.journal import OutboxEvent
from . import cloudevents
from .cloudevents import ContentMode, EventFormat
from .log import trim_sent
from .marks import SentMarks
from .options import RelayOptions
from .schema import message_key
from .scope import NOTHING, AllClusters, InFlight, OwnedClusters, Scope, Turn
from .topic import create_topic, topic_metadata

log = logging.getLogger(__name__)
OUTBOX = table_of(OutboxEvent)
_TOPIC_GONE = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)
LOOK_INTERVAL = 2.0  # seconds between counts of the backlog (and probes of a broker that was down)
STANDBY_POLL = 1.0  # seconds between a standby relay's tries of the publisher lock


class RelayFailed(Exception):
    """The relay cannot go on with this producer (a fatal librdkafka error): run() again starts afresh."""


class OutboxRelay:
    def __init__(self, database: Database, options: RelayOptions, *, per_cluster: bool = False) -> None:
        """``per_cluster``: publish only the clusters handed over by own() (leader election; PostgreSQL only)."""
        if not options.kafka:
            raise ValueError("RelayOptions.kafka, the broker's HOST:PORT, is not set")
        self.database = database
        self.options = options
        self.bootstrap: str = options.kafka
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._delivered: list[int] = []
        self._failed: list[tuple[int, KafkaError]] = []
        self._lock = threading.Lock()
        self._in_flight = InFlight()
        self._cursor = 0
        self._last_progress = time.monotonic()
        self.topic_ready = False
        # What events/component.py shows on /readyz (written by the relay's thread, read by others).
        self.trouble_since: float | None = None  # monotonic time since the broker has been unreachable
        self.last_error: str | None = None
        self.pending = 0  # unsent outbox rows at the last count
        self._fatal: KafkaError | None = None
        self._last_look = 0.0
        shared = database.engine.dialect.name == "postgresql"
        self.scope: Scope = OwnedClusters(database.engine) if per_cluster and shared else AllClusters(database.engine)
        self._turn = NOTHING
        self._marks: SentMarks | None = None  # while run() runs
        self._marking: set[int] = set()  # delivered ids handed to the marks, still in flight until marked
        self._select = self._rows_query()

    # --- control, from any thread ------------------------------------------

    def wake(self, *_: object) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    @property
    def per_cluster(self) -> bool:
        return isinstance(self.scope, OwnedClusters)

    @property
    def publishing(self) -> bool:
        """It publishes (all clusters or some); False: a standby, another replica publishes."""
        return self.scope.publishing

    # --- the loop (its own thread) -------------------------------------------

    def run(self) -> None:
        """Relay until stop(); may be called again after it raised (a fresh producer, from the outbox's state)."""
        self._restart()
        producer = Producer(self._producer_config())
        backoff = Backoff(0.5, 30.0)
        self._marks = SentMarks(self.database, on_marked=self.wake, trim=self._trim)
        self._marks.start()
        try:
            while not self._stop.is_set():
                try:
                    if not self._may_publish(producer):
                        self._stop.wait(STANDBY_POLL)
                        continue
                    self._step(producer)
                    backoff.reset()
                except (KafkaException, sa.exc.SQLAlchemyError) as error:
                    delay = backoff.next()
                    self._trouble(error, broker=isinstance(error, KafkaException))
                    log.warning("event relay: %s; retrying in %.1fs", error, delay)
                    self._stop.wait(delay)
            producer.flush(10)
            self._settle()
        finally:
            self._marks.close()
            self._take_marked()
            self._marks = None
            self._report_pending()
            self.scope.close()
            self._turn = NOTHING

    def _may_publish(self, producer: Producer) -> bool:
        """Whether this relay has rows to publish or deliveries to wait for; on losing its locks, drop what is
        queued."""
        turn: Turn = self.scope.turn(self._in_flight.by_cluster)
        if turn.lost:
            log.warning(
                "event relay: another replica publishes now; dropping %d events in flight", len(self._in_flight)
            )
            producer.purge()
            producer.poll(0)
            self._restart()
        elif turn.added:
            self._cursor = 0  # a cluster taken over: its unsent rows may lie below the cursor
        self._turn = turn
        return turn.publish or len(self._in_flight) > 0

    def _producer_config(self) -> dict[str, object]:
        return {
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": 0,  # never give up: the outbox is the buffer, the broker may be down for long
            "linger.ms": 2,
            "compression.type": "none",
            "logger": logging.getLogger("kuberaven.kafka"),
            "error_cb": self._on_error,
        }

    def _step(self, producer: Producer) -> None:
        self._look(producer)
        if not self.topic_ready:
            self._ensure_topic(producer)
        elif self._in_flight and time.monotonic() - self._last_progress > 5:
            self._check_topic(producer)
        produced = self._produce_batch(producer) if len(self._in_flight) < self.options.max_in_flight else 0
        producer.poll(0.05 if self._awaiting() else 0)
        settled = self._settle() + self._take_marked()
        if not produced and not settled:
            self._wake.wait(self.options.idle_poll if not self._awaiting() else 0.05)  # marks wake it too
            self._wake.clear()

    def _ensure_topic(self, producer: Producer) -> None:
        existing = self._metadata(producer)
        if existing is None or existing.error is not None:
            create_topic(producer, self.bootstrap, self.options)
        self.topic_ready = True

    def _check_topic(self, producer: Producer) -> None:
        """Deliveries stalled: a broker that restarted without storage lost the topic; create it again."""
        self._last_progress = time.monotonic()
        metadata = self._metadata(producer)
        if metadata is None or metadata.error is not None:
            log.warning("event relay: topic %s is missing on the broker; creating it", self.options.topic)
            self._ensure_topic(producer)

    def _scoped(self, query: sa.Select[Any]) -> sa.Select[Any]:
        """Only the rows of the clusters this relay publishes now."""
        clusters = self._turn.clusters
        return query if clusters is None else query.where(OUTBOX.c.cluster.in_(sorted(clusters)))

    def _rows_query(self) -> sa.Select[Any]:
        """The columns a message is made of: the payload as its stored JSON text (PostgreSQL's driver would decode
        a json column), and for CloudEvents' binary mode the event's time from inside it (the other attributes
        are columns of the row)."""
        payload = sa.cast(OUTBOX.c.payload, sa.Text).label("payload")
        columns: list[sa.ColumnElement[Any]] = [*OUTBOX.c["id", "cluster", "key", "status", "event_id"], payload]
        if self._binary_cloudevents:
            columns.append(OUTBOX.c.payload["time"].as_string().label("time"))
        return sa.select(*columns)

    @property
    def _binary_cloudevents(self) -> bool:
        options = self.options
        return options.event_format is EventFormat.CLOUDEVENTS and options.event_cloudevents_mode is ContentMode.BINARY

    def _produce_batch(self, producer: Producer) -> int:
        if not self._turn.publish:
            return 0  # only waiting for the deliveries of clusters let go
        with self.database.engine.connect() as db:
            rows = db.execute(
                self._scoped(self._select)
                .where(OUTBOX.c.sent.is_(None), OUTBOX.c.id > self._cursor)
                .order_by(OUTBOX.c.id)
                .limit(self.options.batch)
            ).all()
        produced = 0
        for row in rows:
            self._cursor = row.id
            if row.id in self._in_flight:
                continue
            self._produce(producer, row)
            produced += 1
        metrics.OUTBOX_PENDING.set(len(self._in_flight))
        return produced

    def _message(self, row: sa.Row[Any]) -> tuple[bytes, cloudevents.Headers]:
        if self._binary_cloudevents:
            attributes = cloudevents.row_attributes(row.event_id, row.cluster, row.status, row.time, row.key)
            return cloudevents.binary_message(row.payload, attributes)
        if self.options.event_format is EventFormat.CLOUDEVENTS:
            return cloudevents.message(json.loads(row.payload), ContentMode.STRUCTURED)  # wraps the event
        return cloudevents.xos_message(row.payload, row.event_id, row.status)

    def _produce(self, producer: Producer, row: sa.Row[Any]) -> None:
        value, headers = self._message(row)
        key = message_key(row.key, self.options.event_key).encode()
        while True:
            try:
                producer.produce(
                    self.options.topic, value=value, key=key, headers=headers, on_delivery=self._on_delivery(row.id)
                )
                self._in_flight.add(row.id, row.cluster)
                return
            except BufferError:
                producer.poll(0.1)  # librdkafka's queue is full: let deliveries drain it

    def _on_delivery(self, outbox_id: int) -> Callable[[KafkaError | None, Message], None]:
        def report(error: KafkaError | None, _message: Message) -> None:
            with self._lock:
                if error is None:
                    self.trouble_since = None
                    self._delivered.append(outbox_id)
                else:
                    self._failed.append((outbox_id, error))

        return report

    def _awaiting(self) -> int:
        """Rows produced and not yet acknowledged by the broker (in flight, not being marked)."""
        return len(self._in_flight) - len(self._marking)

    def _settle(self) -> int:
        """Record delivery reports: sent rows to mark (marks.py), and failures to produce again."""
        with self._lock:
            delivered, self._delivered = self._delivered, []
            failed, self._failed = self._failed, []
        if delivered or failed:
            self._last_progress = time.monotonic()
        if delivered:
            self._marking.update(delivered)
            assert self._marks is not None, "run() made the marks"
            # The last of a burst (nothing else awaits the broker; failures are produced again): mark it now.
            self._marks.add(delivered, now=self._awaiting() <= len(failed))
        if failed:
            metrics.EVENTS_PUBLISH_ERRORS.inc(len(failed))
            ids = [outbox_id for outbox_id, _ in failed]
            log.warning("event relay: %d deliveries failed (first: %s); producing them again", len(ids), failed[0][1])
            if any(error.code() in _TOPIC_GONE for _, error in failed):
                self.topic_ready = False  # a broker that lost its topics (restarted without storage)
            self._in_flight.difference_update(ids)
            self._cursor = min(self._cursor, min(ids) - 1)
            with self.database.engine.begin() as db:  # for the record only: a failure here loses nothing
                for outbox_id, error in failed:
                    db.execute(
                        sa.update(OUTBOX)
                        .where(OUTBOX.c.id == outbox_id)
                        .values(attempts=OUTBOX.c.attempts + 1, last_error=str(error))
                    )
        return len(delivered) + len(failed)

    def _take_marked(self) -> int:
        """Rows the marks wrote sent: no longer in flight."""
        assert self._marks is not None, "run() made the marks"
        if self._marks.last_error is not None:
            self.last_error = self._marks.last_error
        marked = [outbox_id for outbox_id in self._marks.take_marked() if outbox_id in self._marking]
        if marked:
            self._marking.difference_update(marked)
            self._in_flight.difference_update(marked)
            metrics.EVENTS_PUBLISHED.inc(len(marked))
        return len(marked)

    def _trim(self) -> None:
        """Sent rows past their retention go (called by the marks' thread: a write, kept off the produce loop)."""
        trim_sent(self.database, self.options.outbox_retention, time.time())

    # --- health: what /readyz shows (events/component.py) ---------------------------

    def _restart(self) -> None:
        """Forget what a previous run() had in flight: its producer is gone, the outbox still holds the rows."""
        with self._lock:
            self._delivered, self._failed = [], []
        self._in_flight.clear()
        self._marking.clear()  # marks still being written land (true: those rows were delivered), ignored here
        self._cursor = 0
        self._fatal = None
        self.topic_ready = False

    def _on_error(self, error: KafkaError) -> None:
        """librdkafka's error callback (the relay's thread, from poll/flush)."""
        if error.fatal():
            self._fatal = error  # the producer is unusable: _look() raises, the supervisor restarts the relay
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._trouble(error, broker=True)

    def _trouble(self, error: object, *, broker: bool) -> None:
        self.last_error = str(error)
        if broker and self.trouble_since is None:
            self.trouble_since = time.monotonic()

    def _metadata(self, producer: Producer) -> TopicMetadata | None:
        found = topic_metadata(producer, self.options.topic)
        self.trouble_since = None  # the broker answered
        return found

    def _look(self, producer: Producer) -> None:
        """Every few seconds: count the backlog; ask an idle broker believed down whether it is back."""
        if self._fatal is not None:
            raise RelayFailed(f"the Kafka producer failed: {self._fatal}")
        now = time.monotonic()
        if now - self._last_look < LOOK_INTERVAL:
            return
        self._last_look = now
        with self.database.engine.connect() as db:
            self.pending = db.execute(sa.select(sa.func.count()).where(OUTBOX.c.sent.is_(None))).scalar_one()
            self._rescan(db)
        if self.trouble_since is not None and not self._in_flight:
            self._metadata(producer)

    def _rescan(self, db: sa.Connection) -> None:
        """Move the cursor back to unsent rows below it that are not in flight: rows committed late."""
        if not self._turn.publish:
            return
        query = self._scoped(sa.select(OUTBOX.c.id)).where(OUTBOX.c.sent.is_(None), OUTBOX.c.id <= self._cursor)
        unsent = db.execute(query)
        late = [outbox_id for outbox_id in unsent.scalars() if outbox_id not in self._in_flight]
        if late:
            log.debug("event relay: %d events committed behind the cursor; producing them", len(late))
            self._cursor = min(late) - 1

    def unreachable_for(self) -> float:
        """Seconds since the broker was last found unreachable and has not answered since (0: it answers)."""
        since = self.trouble_since
        return 0.0 if since is None else time.monotonic() - since

    def _report_pending(self) -> None:
        if self._in_flight:
            log.info(
                "event relay stopped with %d events unacknowledged; they are sent on the next start",
                len(self._in_flight),
            )
