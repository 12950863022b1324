"""Per-cluster publishing (events/scope.py, events/publisher.py's ClusterLocks) on a real PostgreSQL and broker:
each relay publishes the clusters handed to it, one relay per cluster at a time, in order per pod across a
hand-over, and nothing is lost when a publishing process is SIGKILLed mid-publish."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from kuberaven.events.component import RelayComponent
from kuberaven.events.options import RelayOptions
from kuberaven.events.publisher import ClusterLocks, PublisherLock
from kuberaven.events.relay import OutboxRelay
from kuberaven.events.scope import OwnedClusters
from kuberaven.model import Database, OutboxEvent
from kuberaven.testing.broker import Broker, kafka_messages
from kuberaven.testing.postgres import PostgresServer
from tests.helpers import eventually, write_events

EDGE, CORE = "edge", "core"


@pytest.fixture
def database(postgres: PostgresServer) -> Iterator[Database]:
    database = Database(postgres.create_database(f"t_{uuid.uuid4().hex[:12]}"))
    database.prepare()
    try:
        yield database
    finally:
        database.dispose()


def _write(database: Database, cluster: str, keys: list[str], rounds: range) -> list[OutboxEvent]:
    return write_events(database, cluster, [f"{cluster}/{key}" for key in keys], rounds)


def _unsent(database: Database, cluster: str | None = None) -> int:
    query = sa.select(sa.func.count()).select_from(OutboxEvent).where(OutboxEvent.sent.is_(None))
    if cluster is not None:
        query = query.where(OutboxEvent.cluster == cluster)
    with database.session() as session:
        return int(session.execute(query).scalar_one())


def _rounds_per_key(bootstrap: str, topic: str, events: list[OutboxEvent]) -> dict[str, list[int]]:
    """Per key, the rounds of ``events`` in order of first appearance (one partition per key: the publishing
    order); other messages of the topic are left out."""
    seen: dict[str, list[int]] = {}
    wanted = {e.event_id for e in events}
    for message in kafka_messages(bootstrap, topic, wanted):
        payload = json.loads(message.value())
        if payload["event_id"] not in wanted:
            continue
        rounds = seen.setdefault(payload["key"], [])
        if payload["round"] not in rounds:
            rounds.append(payload["round"])
    return seen


class Running:
    """Relays running in threads, stopped at the end."""

    def __init__(self, database: Database, options: RelayOptions, count: int) -> None:
        self.relays = [OutboxRelay(database, options, per_cluster=True) for _ in range(count)]
        self.threads = [threading.Thread(target=r.run, daemon=True) for r in self.relays]

    def __enter__(self) -> list[OutboxRelay]:
        for thread in self.threads:
            thread.start()
        return self.relays

    def __exit__(self, *_: object) -> None:
        for relay, thread in zip(self.relays, self.threads, strict=True):
            relay.stop()
            thread.join(30)


async def _relay_passed(database: Database, relay: OutboxRelay) -> None:
    """Until the relay has published a marker of CORE (taking CORE if it must) written after everything else: it
    has read the outbox past every earlier row, so a row of a cluster it published would be in flight or sent."""
    _scope(relay).own(CORE)
    _write(database, CORE, [f"marker-{uuid.uuid4().hex[:6]}"], range(1))
    await eventually(lambda: _unsent(database, CORE) == 0, timeout=60)


def _scope(relay: OutboxRelay) -> OwnedClusters:
    assert isinstance(relay.scope, OwnedClusters)
    return relay.scope


async def test_each_relay_publishes_its_clusters_and_a_cluster_moves_in_order(
    database: Database, broker: Broker
) -> None:
    options = RelayOptions(kafka=broker.bootstrap, topic=f"pc-{uuid.uuid4().hex[:8]}", idle_poll=0.1)
    keys = [f"pod-{i}" for i in range(5)]
    with Running(database, options, 2) as (a, b):
        _scope(a).own(CORE)
        _scope(a).own(EDGE)
        await eventually(lambda: _assert(_scope(a).locks.held == {CORE, EDGE}), timeout=30)
        _scope(b).own(EDGE)  # wanted by both now: a holds it, b waits for its lock
        first = _write(database, CORE, keys, range(20)) + _write(database, EDGE, keys, range(20))
        await eventually(lambda: _assert(_unsent(database) == 0), timeout=60)
        assert _scope(b).locks.held == set(), "b never took edge while a held it"
        # edge moves to b while its next rounds are written: a lets it go once nothing of it is in flight.
        second = _write(database, EDGE, keys, range(20, 30))
        left = _scope(a).disown(EDGE)
        a.wake()
        second += _write(database, EDGE, keys, range(30, 40)) + _write(database, CORE, keys, range(20, 40))
        assert left.wait(30), "a let edge's lock go"
        await eventually(lambda: _assert(_scope(b).locks.held == {EDGE}), timeout=30)
        await eventually(lambda: _assert(_unsent(database) == 0), timeout=60)
        assert _scope(a).locks.held == {CORE}
    rounds = _rounds_per_key(broker.bootstrap, options.topic, first + second)
    assert rounds == {f"{c}/{k}": list(range(40)) for c in (CORE, EDGE) for k in keys}


async def test_an_owned_clusters_component_publishes_it_and_lets_it_go_on_stop(
    database: Database, broker: Broker
) -> None:
    options = RelayOptions(kafka=broker.bootstrap, topic=f"pc-{uuid.uuid4().hex[:8]}", idle_poll=0.1)
    assert RelayComponent(OutboxRelay(database, options)).for_cluster(EDGE) is None, "one publisher: no component"
    with Running(database, options, 1) as (relay,):
        component = RelayComponent(relay).for_cluster(EDGE)
        assert component is not None
        task = asyncio.create_task(component.run())
        events = _write(database, EDGE, ["p"], range(10))
        await eventually(lambda: _assert(_unsent(database) == 0), timeout=60)
        assert relay.publishing
        component.stop()
        await asyncio.wait_for(task, 30)
        assert _scope(relay).locks.held == set() and not relay.publishing
        _write(database, EDGE, ["p"], range(10, 12))
        await _relay_passed(database, relay)
        assert _unsent(database, EDGE) == 2 and EDGE not in relay._in_flight.by_cluster, "no longer published here"
    assert _rounds_per_key(broker.bootstrap, options.topic, events) == {f"{EDGE}/p": list(range(10))}


async def test_a_cluster_nobody_owns_waits_in_the_outbox(database: Database, broker: Broker) -> None:
    options = RelayOptions(kafka=broker.bootstrap, topic=f"pc-{uuid.uuid4().hex[:8]}", idle_poll=0.1)
    with Running(database, options, 1) as (relay,):
        _scope(relay).own(CORE)
        events = _write(database, CORE, ["p"], range(5))
        _write(database, EDGE, ["p"], range(5))
        await eventually(lambda: _assert(_unsent(database, CORE) == 0), timeout=60)
        await _relay_passed(database, relay)
        assert _unsent(database, EDGE) == 5 and EDGE not in relay._in_flight.by_cluster
        assert _rounds_per_key(broker.bootstrap, options.topic, events) == {f"{CORE}/p": list(range(5))}


async def test_one_publisher_and_per_cluster_publishers_exclude_each_other(database: Database) -> None:
    one, per_cluster, other = (
        PublisherLock(database.engine),
        ClusterLocks(database.engine),
        ClusterLocks(database.engine),
    )
    try:
        assert per_cluster.take(EDGE)
        assert not other.take(EDGE), "one cluster, one relay"
        assert other.take(CORE), "another cluster is free"
        assert not one.held(), "per-cluster publishers hold the one publisher's lock shared"
        per_cluster.close()
        other.close()
        # Closing drops the connections; PostgreSQL lets their session locks go once their backends notice.
        await eventually(lambda: _assert(one.held()), timeout=10)
        assert not ClusterLocks(database.engine).take(EDGE), "the one publisher keeps per-cluster ones out"
    finally:
        one.release()
        per_cluster.close()
        other.close()


def test_a_lock_is_let_go_only_after_the_clusters_deliveries(database: Database) -> None:
    """Disowned with events of it in flight: the lock stays until they settle; then it goes."""
    scope, rival = OwnedClusters(database.engine), ClusterLocks(database.engine)
    try:
        scope.own(EDGE)
        assert scope.turn({}).clusters == frozenset({EDGE})
        left = scope.disown(EDGE)
        turn = scope.turn({EDGE: 3})
        assert turn.clusters == frozenset() and not left.is_set()
        assert not rival.take(EDGE)
        scope.turn({})
        assert left.is_set()
        assert rival.take(EDGE)
    finally:
        scope.close()
        rival.close()


_PUBLISHER = """
import sys
from kuberaven.events.component import RelayComponent
from kuberaven.events.options import RelayOptions
from kuberaven.events.relay import OutboxRelay
from kuberaven.model import Database
# Few in flight: the marks (each after its rows' deliveries) pace the publishing, so that it is killed midway.
options = RelayOptions(kafka=sys.argv[2], topic=sys.argv[3], batch=50, max_in_flight=100)
relay = OutboxRelay(Database(sys.argv[1]), options, per_cluster=True)
relay.scope.own(sys.argv[4])
relay.run()
"""


def _start_publisher(database: Database, options: RelayOptions, cluster: str, log: Path) -> subprocess.Popen[bytes]:
    """A relay in a process of its own, publishing ``cluster`` (to be SIGKILLed); its output goes to ``log``."""
    url = database.url.render_as_string(hide_password=False)
    assert options.kafka is not None
    command = [sys.executable, "-c", _PUBLISHER, url, options.kafka, options.topic, cluster]
    with log.open("wb") as sink:
        return subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=os.environ)


async def test_a_publisher_sigkilled_mid_publish_loses_nothing_and_keeps_the_order(
    database: Database, broker: Broker, tmp_path: Path
) -> None:
    options = RelayOptions(kafka=broker.bootstrap, topic=f"pc-{uuid.uuid4().hex[:8]}", idle_poll=0.1)
    keys = [f"pod-{i}" for i in range(20)]
    events = _write(database, EDGE, keys, range(200))
    child = _start_publisher(database, options, EDGE, tmp_path / "publisher.log")
    try:
        await eventually(lambda: _assert(_unsent(database) < len(events) - 200), timeout=60, interval=0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert _unsent(database) > 0, "killed mid-publish"
    with Running(database, options, 1) as (relay,):
        _scope(relay).own(EDGE)  # the lock went with the killed process's connection
        await eventually(lambda: _assert(_unsent(database) == 0), timeout=60)
    rounds = _rounds_per_key(broker.bootstrap, options.topic, events)
    assert rounds == {f"{EDGE}/{k}": list(range(200)) for k in keys}


def _assert(condition: bool) -> None:
    assert condition
