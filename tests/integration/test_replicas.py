"""Replicas sharing clusters (runtime/clusters.py) on one PostgreSQL and one broker: two control planes,
two ``kuberaven run`` processes, one SIGKILLed and restarted; and the outbox relay publishing from one
replica at a time (events/publisher.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from kuberaven.events.options import RelayOptions
from kuberaven.events.relay import OutboxRelay
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, KubernetesService, OutboxEvent
from kuberaven.model.deletes import remove
from kuberaven.testing.broker import Broker, kafka_messages
from kuberaven.testing.env import TestEnv
from kuberaven.testing.free_ports import free_port
from kuberaven.testing.namespaces import create_namespace
from kuberaven.testing.postgres import PostgresServer
from tests.helpers import daemon_running, eventually, write_events

LEASE = {"KUBERAVEN_LEASE_DURATION": "4", "KUBERAVEN_RENEW_DEADLINE": "3", "KUBERAVEN_RETRY_PERIOD": "0.5"}
LEASE_DURATION = 4.0
EDGE = "edge"
BOTH = ["edge", "kubernetes"]


def _sent(database: Database) -> int:
    with database.session() as session:
        return session.query(OutboxEvent).filter(OutboxEvent.sent.is_not(None)).count()


async def test_one_relay_publishes_at_a_time_and_the_other_takes_over_in_order(
    postgres: PostgresServer, broker: Broker
) -> None:
    database = Database(postgres.create_database(f"t_{uuid.uuid4().hex[:12]}"))
    database.prepare()
    options = RelayOptions(kafka=broker.bootstrap, topic=f"relay-{uuid.uuid4().hex[:8]}", idle_poll=0.1)
    relays = [OutboxRelay(database, options), OutboxRelay(database, options)]
    threads = [threading.Thread(target=relay.run, daemon=True) for relay in relays]
    keys = [f"ns/pod-{i}" for i in range(5)]
    try:
        for thread in threads:
            thread.start()
        first = write_events(database, "kubernetes", keys, range(20))
        await eventually(lambda: _assert(_sent(database) == len(first)), timeout=60)
        publishing = [relay.publishing for relay in relays]
        assert sorted(publishing) == [False, True], "exactly one relay publishes"
        holder = publishing.index(True)
        relays[holder].stop()
        threads[holder].join(30)
        second = write_events(database, "kubernetes", keys, range(20, 40))
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


# -- two replicas, two clusters --------------------------------------------------------------------


@pytest.fixture(scope="module")
def second_env() -> Iterator[TestEnv]:
    """A second control plane (and fake kubelet), for the cluster "edge"."""
    env = TestEnv(nodes=1, broker=False)
    env.start()
    try:
        yield env
    finally:
        env.stop()


def owned(url: str) -> list[str] | None:
    """The clusters a daemon's /readyz lists (None: it does not answer)."""
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=2) as answer:
            return list(json.loads(answer.read())["clusters"])
    except urllib.error.HTTPError as error:
        return list(json.loads(error.read())["clusters"])
    except OSError:
        return None


def _owned_metrics(url: str) -> dict[str, float]:
    """kuberaven_cluster_owned by cluster, from /metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    found = re.findall(r'^kuberaven_cluster_owned\{cluster="([^"]+)"\} (\S+)$', text, re.MULTILINE)
    return {cluster: float(value) for cluster, value in found}


class Replica:
    """A ``kuberaven run --leader-elect`` subprocess; its log goes to a file, never a pipe that could fill."""

    def __init__(self, name: str, env: dict[str, str], log: Path) -> None:
        self.name = name
        self.url = f"http://127.0.0.1:{free_port()}"
        self.env = {**env, "KUBERAVEN_LISTEN": self.url.removeprefix("http://")}
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kuberaven", "run", "--no-network"],
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )

    def owned(self) -> list[str] | None:
        return owned(self.url)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int | None:
        """SIGTERM; its exit code (None if it had to be killed)."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


async def _owners(replicas: list[Replica], expected: dict[str, list[str]], timeout: float) -> None:
    async def check() -> None:
        found = {r.name: r.owned() for r in replicas}
        assert found == expected, found

    try:
        await eventually(check, timeout=timeout, interval=0.2)
    except AssertionError:
        raise AssertionError("\n".join(f"--- {r.name}:\n{r.output()}" for r in replicas)) from None


class Churn:
    """Pods created (and some deleted) in one namespace of each cluster until stopped; records the uids created."""

    def __init__(self, clients: dict[str, KubeClient], namespace: str) -> None:
        self.clients = clients
        self.namespace = namespace
        self.created: dict[str, set[str]] = {cluster: set() for cluster in clients}

    async def run(self) -> None:
        for i in range(10_000):
            for cluster, client in self.clients.items():
                pods = f"/api/v1/namespaces/{self.namespace}/pods"
                pod = await client.request("POST", pods, body=_pod(f"churn-{i}"))
                self.created[cluster].add(pod["metadata"]["uid"])
                if i % 3 == 2:
                    await client.request("DELETE", f"{pods}/churn-{i - 2}")
            await asyncio.sleep(0.2)

    async def more(self, count: int) -> None:
        """Until ``count`` more pods have been created in each cluster: the churn went on through a phase."""
        before = {cluster: len(uids) for cluster, uids in self.created.items()}
        await eventually(lambda: all(len(self.created[c]) >= before[c] + count for c in before), timeout=60)


@contextlib.asynccontextmanager
async def churning(clients: dict[str, KubeClient], namespace: str) -> AsyncIterator[Churn]:
    churn = Churn(clients, namespace)
    task = asyncio.create_task(churn.run())
    try:
        yield churn
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _created_events(database: Database, namespace: str) -> dict[tuple[str, str], OutboxEvent]:
    """(cluster, uid) → its "created" event, for the pods of ``namespace`` in both clusters."""
    with database.session() as session:
        events = session.scalars(
            sa.select(OutboxEvent).where(OutboxEvent.key.startswith(f"{namespace}/"), OutboxEvent.status == "created")
        )
        return {(e.cluster, e.payload["uid"]): e for e in events}


async def _every_creation_published(
    database: Database, namespace: str, created: set[tuple[str, str]], bootstrap: str, topic: str
) -> None:
    """Each pod created has its "created" event in the outbox, acknowledged, and in the topic."""

    def every_creation_sent() -> None:
        events = _created_events(database, namespace)
        missing = created - set(events)
        assert not missing, f"{len(missing)} of {len(created)} pods have no created event"
        assert all(events[each].sent for each in created), "every created event acknowledged by Kafka"

    await eventually(every_creation_sent, timeout=60)
    wanted = {_created_events(database, namespace)[each].event_id for each in created}
    assert wanted <= {json.loads(m.value())["event_id"] for m in kafka_messages(bootstrap, topic, wanted)}


async def test_two_replicas_share_two_clusters_and_take_over_a_killed_ones(
    testenv: TestEnv, second_env: TestEnv, postgres: PostgresServer, tmp_path: Path
) -> None:
    assert testenv.broker is not None
    database = Database(postgres.create_database(f"t_{uuid.uuid4().hex[:12]}"))
    database.prepare(str(testenv.control_plane.kubeconfig))
    with database.session() as session:
        session.add(KubernetesService(name=EDGE, kubeconfig=str(second_env.control_plane.kubeconfig)))
        session.commit()
    topic = f"replicas-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        **LEASE,
        "KUBERAVEN_DB": database.url.render_as_string(hide_password=False),
        "KUBERAVEN_KUBECONFIG": str(testenv.control_plane.kubeconfig),
        "KUBERAVEN_KAFKA": testenv.broker.bootstrap,
        "KUBERAVEN_TOPIC": topic,
        "KUBERAVEN_LEADER_ELECT": "true",
        "KUBERAVEN_CLUSTER_POLL": "1",
        "KUBERAVEN_LEASE_NAME": f"kr-{uuid.uuid4().hex[:6]}",
    }
    a, b = Replica("a", env, tmp_path / "a.log"), Replica("b", env, tmp_path / "b.log")
    clients = {
        "kubernetes": KubeClient.from_kubeconfig(testenv.control_plane.kubeconfig),
        EDGE: KubeClient.from_kubeconfig(second_env.control_plane.kubeconfig),
    }
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    try:
        for client in clients.values():
            await create_namespace(client, namespace)
        a.start()
        await _owners([a], {"a": BOTH}, timeout=60)  # alone, it owns both (and publishes the outbox)
        async with churning(clients, namespace) as churn:
            b.start()
            # One each: a keeps the first by name and hands "kubernetes" over.
            await _owners([a, b], {"a": [EDGE], "b": ["kubernetes"]}, timeout=60)
            await churn.more(5)  # pods created while both replicas run
            a.kill()  # the owner of "edge", and the relay that publishes
            killed = time.monotonic()
            await _owners([b], {"b": BOTH}, timeout=LEASE_DURATION + 5)
            assert time.monotonic() - killed < LEASE_DURATION + 5
            await churn.more(10)  # pods created while only one replica runs
            a = Replica("a", env, tmp_path / "a2.log")
            a.start()
            # Rebalanced: b, at twice its share, keeps "edge" and hands "kubernetes" to the new a.
            await _owners([a, b], {"a": ["kubernetes"], "b": [EDGE]}, timeout=60)
            assert _owned_metrics(a.url) == {"kubernetes": 1.0, EDGE: 0.0}
            assert _owned_metrics(b.url) == {"kubernetes": 0.0, EDGE: 1.0}
            await churn.more(5)  # pods created once rebalanced
        created = {(cluster, uid) for cluster, uids in churn.created.items() for uid in uids}
        assert {cluster for cluster, _ in created} == set(BOTH)
        await _every_creation_published(database, namespace, created, testenv.broker.bootstrap, topic)
    finally:
        codes = {r.name: r.stop() for r in (a, b)}
        for client in clients.values():
            with contextlib.suppress(Exception):
                await client.request("DELETE", f"/api/v1/namespaces/{namespace}")
            await client.close()
        database.dispose()
    assert codes == {"a": 0, "b": 0}, a.output() + b.output()


async def test_a_cluster_row_added_changed_and_deleted_while_running_is_watched_restarted_and_dropped(
    kube: KubeClient, namespace: str, testenv: TestEnv, tmp_path: Path
) -> None:
    """One process, no election: every row is owned. "mirror" is a second row for the same API server."""
    kubeconfig = testenv.control_plane.kubeconfig
    with daemon_running(kubeconfig, tmp_path, "--no-network", env={"KUBERAVEN_CLUSTER_POLL": "0.5"}) as daemon:
        assert owned(daemon.url) == ["kubernetes"]
        database = Database(daemon.database_url)
        try:
            with database.session() as session:
                session.add(KubernetesService(name="mirror", kubeconfig=str(kubeconfig)))
                session.commit()
            await eventually(lambda: _assert(owned(daemon.url) == ["kubernetes", "mirror"]), timeout=20)
            await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=_pod("seen-twice"))

            def created_in(cluster: str) -> None:
                with database.session() as session:
                    found = session.scalars(
                        sa.select(OutboxEvent.cluster).where(
                            OutboxEvent.key == f"{namespace}/seen-twice", OutboxEvent.status == "created"
                        )
                    )
                    assert cluster in set(found)

            await eventually(lambda: created_in("mirror"), timeout=30)
            moved = tmp_path / "mirror.kubeconfig"
            moved.write_bytes(kubeconfig.read_bytes())
            with database.session() as session:
                _mirror(session).kubeconfig = str(moved)
                session.commit()
            changed = "cluster mirror changed; stopping its watches"
            await eventually(lambda: _assert(daemon.output().count(changed) == 1), timeout=20)
            await eventually(lambda: _assert(owned(daemon.url) == ["kubernetes", "mirror"]), timeout=20)
            with database.session() as session:
                _mirror(session).pod_cidr = "10.77.0.0/16"  # its network options restart it too
                session.commit()
            await eventually(lambda: _assert(daemon.output().count(changed) == 2), timeout=20)
            await eventually(lambda: _assert(owned(daemon.url) == ["kubernetes", "mirror"]), timeout=20)
            with database.session() as session:
                remove(session, _mirror(session), cascade=True)
            await eventually(lambda: _assert(owned(daemon.url) == ["kubernetes"]), timeout=20)
            assert "cluster mirror was deleted; stopping its watches" in daemon.output()
        finally:
            database.dispose()


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}


def _mirror(session: Session) -> KubernetesService:
    return session.scalars(sa.select(KubernetesService).where(KubernetesService.name == "mirror")).one()


def _assert(condition: bool) -> None:
    assert condition
