"""Pod events: outbox in the inventory's transaction, relayed to a real Kafka-protocol broker."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cloudevents.core.bindings import kafka as ce_kafka
from confluent_kafka.admin import AdminClient

from kuberaven.events.cloudevents import ContentMode, EventFormat
from kuberaven.events.options import RelayOptions
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, OutboxEvent
from kuberaven.testing.broker import Broker, kafka_messages
from kuberaven.testing.env import TestEnv
from kuberaven.testing.free_ports import free_port
from kuberaven.testing.kubelet import restart_container
from tests.helpers import RelayThread, eventually, inventory_running


def outbox(database: Database, key_prefix: str) -> list[OutboxEvent]:
    with database.session() as session:
        return list(
            session.scalars(
                sa.select(OutboxEvent).where(OutboxEvent.key.startswith(key_prefix)).order_by(OutboxEvent.id)
            )
        )


def bare_pod(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]},
    }


async def test_pod_lifecycle_events_reach_kafka_in_order(
    kube: KubeClient, namespace: str, database: Database, testenv: TestEnv
) -> None:
    assert testenv.broker is not None
    topic = f"pods-{uuid.uuid4().hex[:8]}"
    options = RelayOptions(kafka=testenv.broker.bootstrap, topic=topic, kafka_partitions=2, idle_poll=0.2)
    with RelayThread(database, options) as relay:
        async with inventory_running(kube, database, on_commit=relay.wake):
            await kube.request(
                "POST", f"/api/v1/namespaces/{namespace}/pods", body=bare_pod("life", namespace, xos_service="ONOS")
            )
            prefix = f"{namespace}/life"
            await eventually(lambda: _assert(any(e.payload["phase"] == "Running" for e in outbox(database, prefix))))
            await restart_container(kube, namespace, "life", "c")
            await eventually(lambda: _assert(any(e.status == "restarted" for e in outbox(database, prefix))))
            await kube.request(
                "PATCH",
                f"/api/v1/namespaces/{namespace}/pods/life",
                body={"metadata": {"labels": {"tier": "gold"}}},
                content_type="application/merge-patch+json",
            )
            await eventually(lambda: _assert(outbox(database, prefix)[-1].payload["labels"].get("tier") == "gold"))
            await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/life")
            await eventually(lambda: _assert(outbox(database, prefix)[-1].status == "deleted"))

        events = outbox(database, prefix)
        statuses = [e.status for e in events]
        assert statuses[0] == "created" and statuses[-1] == "deleted"
        assert statuses.count("created") == 1 and statuses.count("deleted") == 1
        assert "restarted" in statuses and "updated" in statuses
        running = next(e.payload for e in events if e.payload["phase"] == "Running")
        assert running["netinterfaces"][0]["addresses"] and running["labels"]["xos_service"] == "ONOS"
        restarted = next(e.payload for e in events if e.status == "restarted")
        assert restarted["restart_count"] == 1
        assert events[-1].payload["uid"] == events[0].payload["uid"]
        assert all(e.payload["kubernetesserviceinstance_id"] for e in events[:-1])

        await eventually(lambda: _assert(all(e.sent for e in outbox(database, prefix))), timeout=30)
    everything = kafka_messages(testenv.broker.bootstrap, topic, {e.event_id for e in events})
    messages = [m for m in everything if m.key() == prefix.encode()]
    published = [json.loads(m.value()) for m in messages]
    assert [p["event_id"] for p in published] == [e.event_id for e in events]  # one partition, outbox order
    assert dict(messages[0].headers()) == {"event_id": events[0].event_id.encode(), "event_type": b"created"}
    assert published[0]["producer"] == "k8s-sync" and published[0]["namespace"] == namespace
    # The relay created the topic as configured (not the broker's auto-create default).
    topics = AdminClient({"bootstrap.servers": testenv.broker.bootstrap}).list_topics(timeout=10).topics
    assert len(topics[topic].partitions) == 2


async def test_broker_down_for_a_while_then_backlog_is_delivered(
    kube: KubeClient, namespace: str, database: Database, tmp_path: Path
) -> None:
    broker = Broker(tmp_path / "broker")
    broker.start()
    topic = "pod-details"
    options = RelayOptions(kafka=broker.bootstrap, topic=topic, idle_poll=0.2)
    try:
        with RelayThread(database, options) as relay:
            async with inventory_running(kube, database, on_commit=relay.wake):
                await eventually(lambda: _assert(relay.topic_ready))
                # Down for a while: the process is frozen (SIGSTOP), so it answers nothing, then
                # comes back with its data (a restart of this in-memory broker would lose the topic).
                assert broker.process is not None
                broker.process.signal(signal.SIGSTOP)
                for i in range(5):
                    await kube.request(
                        "POST", f"/api/v1/namespaces/{namespace}/pods", body=bare_pod(f"p{i}", namespace)
                    )
                await eventually(
                    lambda: _assert(len([e for e in outbox(database, namespace) if e.status == "created"]) == 5)
                )
                # The relay has produced all five (they wait in librdkafka, which never gives up on them): only the
                # frozen broker's acknowledgement could mark them sent now.
                await eventually(lambda: all(e.id in relay._in_flight for e in outbox(database, namespace)))
                assert not any(e.sent for e in outbox(database, namespace)), "nothing can be acknowledged while down"
                broker.process.signal(signal.SIGCONT)
                await eventually(lambda: _assert(all(e.sent for e in outbox(database, namespace))), timeout=90)
            expected = outbox(database, namespace)
        messages = kafka_messages(broker.bootstrap, topic, {e.event_id for e in expected})
        got = {json.loads(m.value())["event_id"] for m in messages}
        assert {e.event_id for e in expected} <= got
    finally:
        broker.stop()


@pytest.fixture
def daemon_env(testenv: TestEnv, database_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    assert testenv.broker is not None
    env = dict(
        os.environ,
        KUBERAVEN_DB=database_url,
        KUBERAVEN_KUBECONFIG=str(testenv.control_plane.kubeconfig),
        KUBERAVEN_KAFKA=testenv.broker.bootstrap,
        KUBERAVEN_TOPIC=f"kill-{uuid.uuid4().hex[:8]}",
        KUBERAVEN_LISTEN=f"127.0.0.1:{free_port()}",
    )
    yield env


def start_daemon(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "kuberaven", "run"], env=env, stdout=out, stderr=out)


async def test_daemon_sigkilled_mid_burst_loses_no_event(
    kube: KubeClient, namespace: str, daemon_env: dict[str, str], database_url: str, tmp_path: Path
) -> None:
    database = Database(database_url)
    log = tmp_path / "daemon.log"
    daemon = start_daemon(daemon_env, log)
    try:
        await eventually(lambda: _assert("inventory synced" in log.read_text()), timeout=60)
        names = [f"burst-{i}" for i in range(40)]
        for i, name in enumerate(names):
            await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=bare_pod(name, namespace))
            if i == 20:
                daemon.send_signal(signal.SIGKILL)  # in the middle of the burst
                daemon.wait(10)
        daemon = start_daemon(daemon_env, log)
        pods = [p async for p in kube.list_objects(f"/api/v1/namespaces/{namespace}/pods")]

        def all_running_and_sent() -> None:
            events = outbox(database, namespace)
            created = {e.payload["name"] for e in events if e.status == "created"}
            assert created == set(names), sorted(set(names) - created)
            assert all(e.sent for e in events), "every event acknowledged by Kafka"
            running = {e.payload["name"] for e in events if e.payload["phase"] == "Running"}
            assert running == set(names), sorted(set(names) - running)

        await eventually(all_running_and_sent, timeout=90)
        events = outbox(database, namespace)
        published = kafka_messages(
            daemon_env["KUBERAVEN_KAFKA"], daemon_env["KUBERAVEN_TOPIC"], {e.event_id for e in events}
        )
        assert {e.event_id for e in events} <= {json.loads(m.value())["event_id"] for m in published}
        from tests.integration.test_inventory import pods_in

        rows = pods_in(database, namespace)
        assert {name: rows[name].uid for name in names} == {
            p["metadata"]["name"]: p["metadata"]["uid"] for p in pods if p["metadata"]["name"] in names
        }
    finally:
        daemon.send_signal(signal.SIGTERM)
        code: int | None
        try:
            code = daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()  # never leave it running past the test
            code = None
        database.dispose()
        assert code == 0, log.read_text()[-3000:]


def _assert(condition: bool) -> None:
    assert condition


class OriginalConsumer:
    """A consumer written like the original ones (ONOS, OLT, fabric services): it acts on "created"
    by reading ``netinterfaces[0].addresses[0]``, dedupes on ``event_id`` (delivery is at least
    once), and here also records every pod's event sequence by uid."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.by_uid: dict[str, list[str]] = {}
        self.addresses: dict[str, str] = {}

    def consume(self, messages: list[Any], namespace: str) -> None:
        for message in messages:
            event = json.loads(message.value())
            if event["namespace"] != namespace or event["event_id"] in self.seen:
                continue
            self.seen.add(event["event_id"])
            self.by_uid.setdefault(event["uid"], []).append(event["status"])
            if event["status"] == "created":
                self.addresses[event["uid"]] = event["netinterfaces"][0]["addresses"][0]


async def test_the_original_event_contract_end_to_end_across_a_sigkill(
    kube: KubeClient, namespace: str, daemon_env: dict[str, str], database_url: str, tmp_path: Path
) -> None:
    """Every row of the contract (docs/data-model-and-events.md), read back from Kafka as an original consumer does.

    The fake kubelet gives pods their IPs; the daemon is SIGKILLed in the middle and restarted on the same database.
    """
    database = Database(database_url)
    log = tmp_path / "daemon.log"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    uids: dict[str, str] = {}

    async def create(name: str, node: str | None = None) -> str:
        body = bare_pod(name, namespace, app="contract")
        if node:
            body["spec"]["nodeName"] = node  # a node no kubelet serves: Pending without an IP for good
        uids[name] = (await kube.request("POST", pods, body=body))["metadata"]["uid"]
        return uids[name]

    def statuses(name: str) -> list[str]:
        return [e.status for e in outbox(database, f"{namespace}/{name}") if e.payload["uid"] == uids[name]]

    async def until(name: str, expected: list[str]) -> None:
        await eventually(lambda: _assert(statuses(name) == expected), timeout=60)

    daemon = start_daemon(daemon_env, log)
    try:
        await eventually(lambda: _assert("inventory synced" in log.read_text()), timeout=60)
        await create("steady")
        await until("steady", ["created"])
        await kube.request(
            "PATCH",
            f"{pods}/steady",
            body={"metadata": {"labels": {"tier": "gold"}}},
            content_type="application/merge-patch+json",
        )
        await until("steady", ["created", "updated"])
        await restart_container(kube, namespace, "steady", "c")
        await until("steady", ["created", "updated", "restarted"])
        await create("never-ran", node="no-such-node")
        await create("replaced")
        await until("replaced", ["created"])
        first_replaced = uids["replaced"]
        await kube.request("DELETE", f"{pods}/replaced", body={"gracePeriodSeconds": 0})
        await create("replaced")
        await kube.request("DELETE", f"{pods}/never-ran", body={"gracePeriodSeconds": 0})
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(10)
        # While it is down: a pod goes, another comes and gets its IP.
        await kube.request("DELETE", f"{pods}/steady", body={"gracePeriodSeconds": 0})
        await create("while-down")
        daemon = start_daemon(daemon_env, log)
        await until("while-down", ["created"])
        await until("steady", ["created", "updated", "restarted", "deleted"])
        await until("replaced", ["created"])

        expected = {
            uids["steady"]: ["created", "updated", "restarted", "deleted"],
            first_replaced: ["created", "deleted"],
            uids["replaced"]: ["created"],
            uids["while-down"]: ["created"],
        }
        await eventually(lambda: _assert(all(e.sent for e in outbox(database, namespace))), timeout=60)
        events = outbox(database, namespace)
        consumer = OriginalConsumer()
        consumer.consume(
            kafka_messages(daemon_env["KUBERAVEN_KAFKA"], daemon_env["KUBERAVEN_TOPIC"], {e.event_id for e in events}),
            namespace,
        )
        assert consumer.by_uid == expected  # nothing for the pod that never had an IP, nothing twice
        assert uids["never-ran"] not in consumer.by_uid
        # The replacement's "deleted" precedes its successor's "created" (one key, one partition).
        order = [(e.status, e.payload["uid"]) for e in events if e.key == f"{namespace}/replaced"]
        assert order == [("created", first_replaced), ("deleted", first_replaced), ("created", uids["replaced"])]
        live = {
            p["metadata"]["uid"]: p["status"]["podIP"]
            async for p in kube.list_objects(pods)
            if p["status"].get("podIP")
        }
        assert {uid: consumer.addresses[uid] for uid in live} == live
    finally:
        daemon.send_signal(signal.SIGTERM)
        code: int | None
        try:
            code = daemon.wait(30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            code = None
        database.dispose()
        assert code == 0, log.read_text()[-3000:]


@pytest.mark.parametrize("mode", [ContentMode.BINARY, ContentMode.STRUCTURED])
async def test_cloudevents_on_kafka_are_read_by_the_cloudevents_sdk(
    kube: KubeClient, namespace: str, database: Database, testenv: TestEnv, mode: ContentMode
) -> None:
    """Every event of a pod's life (created, restarted, updated, deleted) as a CloudEvent that the CloudEvents
    SDK's Kafka binding reads, with the attributes the XOS event gives; the key stays the pod's."""
    assert testenv.broker is not None
    topic = f"ce-{uuid.uuid4().hex[:8]}"
    options = RelayOptions(
        kafka=testenv.broker.bootstrap,
        topic=topic,
        idle_poll=0.2,
        event_format=EventFormat.CLOUDEVENTS,
        event_cloudevents_mode=mode,
    )
    prefix = f"{namespace}/ce"
    with RelayThread(database, options) as relay:
        async with inventory_running(kube, database, on_commit=relay.wake):
            await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=bare_pod("ce", namespace))
            await eventually(lambda: _assert(any(e.payload["phase"] == "Running" for e in outbox(database, prefix))))
            await restart_container(kube, namespace, "ce", "c")
            await kube.request(
                "PATCH",
                f"/api/v1/namespaces/{namespace}/pods/ce",
                body={"metadata": {"labels": {"tier": "gold"}}},
                content_type="application/merge-patch+json",
            )
            await eventually(lambda: _assert(outbox(database, prefix)[-1].payload["labels"].get("tier") == "gold"))
            await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/ce")
            await eventually(lambda: _assert(outbox(database, prefix)[-1].status == "deleted"))
        events = outbox(database, prefix)
        assert {"created", "restarted", "updated", "deleted"} <= {e.status for e in events}
        await eventually(lambda: _assert(all(e.sent for e in outbox(database, prefix))), timeout=30)
    messages = [
        m
        for m in kafka_messages(testenv.broker.bootstrap, topic, {e.event_id for e in events})
        if m.key() == prefix.encode()
    ]
    cloud_events = [
        ce_kafka.from_kafka_event(ce_kafka.KafkaMessage(dict(m.headers() or []), m.key(), m.value())) for m in messages
    ]
    assert [ce.get_id() for ce in cloud_events] == [e.event_id for e in events]  # one partition, outbox order
    for cloud_event, event in zip(cloud_events, events, strict=True):
        assert cloud_event.get_specversion() == "1.0"
        assert cloud_event.get_type() == f"io.kuberaven.pod.{event.status}"
        assert cloud_event.get_source() == f"urn:kuberaven:cluster:{event.cluster}"
        assert cloud_event.get_subject() == prefix
        assert cloud_event.get_time() == dt.datetime.fromisoformat(event.payload["time"])
        assert cloud_event.get_datacontenttype() == "application/json"
        assert cloud_event.get_data() == event.payload  # the XOS event, as the original consumers read it
    expected = b"application/cloudevents+json" if mode is ContentMode.STRUCTURED else b"application/json"
    assert all(dict(m.headers())["content-type"] == expected for m in messages)
