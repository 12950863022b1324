"""Plugins: the example SimpleExampleService, found by its entry point, runs pods through its model policy."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, KubernetesServiceInstance
from kuberaven.model.applying import apply_documents
from kuberaven.model.database import remove
from kuberaven.model.parsing import parse_documents
from kuberaven.plugins import configured_names, policies
from kuberaven.provisioning.model_policies import ModelPolicy, PolicyOptions, PolicyRunner
from tests.helpers import component_running, eventually
from tests.integration.test_sync import get, sync_running, unique

EXAMPLES = Path(__file__).parents[2] / "examples"
INSTANCE = """
- kind: TrustDomain
  name: {namespace}
  owner: kubernetes
- kind: SimpleExampleServiceInstance
  name: hello
  trust_domain: kubernetes/{namespace}
  message: {message}
"""


@contextlib.asynccontextmanager
async def policies_running(database: Database, chosen: Sequence[ModelPolicy]) -> AsyncIterator[PolicyRunner]:
    runner = PolicyRunner(database, chosen, PolicyOptions(poll_interval=0.2))
    async with component_running(runner):
        yield runner


def apply(database: Database, text: str) -> None:
    with database.session() as session:
        apply_documents(session, parse_documents(text))


def instance_row(database: Database) -> Any:
    from simpleexampleservice import SimpleExampleServiceInstance

    with database.session() as session:
        return session.scalar(
            sa.select(SimpleExampleServiceInstance).where(SimpleExampleServiceInstance.name == "hello")
        )


async def test_the_example_plugin_runs_a_pod_serving_its_message(kube: KubeClient, database: Database) -> None:
    assert "simpleexampleservice" in configured_names()  # installed with its entry point
    namespace = unique("see")
    apply(database, INSTANCE.format(namespace=namespace, message="Hello, world"))
    base = f"/api/v1/namespaces/{namespace}"
    async with sync_running(kube, database), policies_running(database, policies()):

        async def serving() -> dict[str, Any]:
            pod = await get(kube, f"{base}/pods/hello")
            assert pod is not None and pod["status"].get("phase") == "Running"
            return pod

        pod = await eventually(serving)
        mount = next(m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["mountPath"].endswith("htdocs"))
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
        config = await get(kube, f"{base}/configmaps/{volume['configMap']['name']}")
        assert config is not None and config["data"] == {"index.html": "Hello, world"}
        row = instance_row(database)
        assert (row.policy_code, row.policy_status) == (1, "OK") and row.policed == row.updated

        apply(database, INSTANCE.format(namespace=namespace, message="Goodbye"))

        async def message_changed() -> None:
            stored = await get(kube, f"{base}/configmaps/hello-message")
            assert stored is not None and stored["data"] == {"index.html": "Goodbye"}

        await eventually(message_changed, timeout=10)

        with Session(database.engine) as session:
            remove(session, session.merge(instance_row(database)))

        async def removed() -> None:
            assert await get(kube, f"{base}/pods/hello") is None
            assert await get(kube, f"{base}/configmaps/hello-message") is None

        await eventually(removed, timeout=20)
    with database.session() as session:
        assert (
            session.scalar(sa.select(KubernetesServiceInstance).where(KubernetesServiceInstance.name == "hello"))
            is None
        )


class Flaky(ModelPolicy):
    """Fails its first two calls, then succeeds."""

    def __init__(self, model: type[Any]) -> None:
        self.model = model  # type: ignore[misc]
        self.calls = 0

    def handle_update(self, session: Session, row: Any) -> None:
        self.calls += 1
        if self.calls <= 2:
            raise RuntimeError(f"backend not ready (call {self.calls})")


async def test_a_failing_policy_is_recorded_and_retried_with_backoff(database: Database) -> None:
    from simpleexampleservice import SimpleExampleServiceInstance

    namespace = unique("flaky")
    apply(database, INSTANCE.format(namespace=namespace, message="x"))
    policy = Flaky(SimpleExampleServiceInstance)
    async with policies_running(database, [policy]) as runner:

        def failed() -> str:
            row = instance_row(database)
            assert row.policy_code == 2
            return row.policy_status

        assert await eventually(failed, timeout=5) == "RuntimeError: backend not ready (call 1)"

        # Polled every 0.2 s, but the retry waits for its backoff (1 s, then 2 s): a whole pass begun after the
        # failure (two passes on from the one that may still be ending) leaves the row alone.
        def passes() -> int:
            done = runner.status()[0].passes
            assert isinstance(done, int)
            return done

        before = passes()
        await eventually(lambda: passes() >= before + 2, timeout=5)
        assert policy.calls == 1

        def recovered() -> None:
            row = instance_row(database)
            assert (row.policy_code, row.policy_status) == (1, "OK"), row.policy_status

        await eventually(recovered, timeout=10)
    assert policy.calls == 3


def test_the_example_consumer_reacts_to_created_and_restarted_pods(testenv: Any) -> None:
    """examples/consume_events.py against the real broker, fed events of the published schema."""
    from confluent_kafka import Producer

    from kuberaven.events.schema import pod_event

    assert testenv.broker is not None
    topic = unique("events")
    producer = Producer({"bootstrap.servers": testenv.broker.bootstrap})
    observed = {
        "uid": "u1",
        "pod_ip": "10.0.0.7",
        "pod_ips": ["10.0.0.7"],
        "labels": {"xos_service": "ONOS"},
        "phase": "Running",
        "node": "n",
        "ready": True,
        "restart_count": 0,
        "containers": [],
    }
    events = [
        pod_event(status, cluster="kubernetes", namespace="ns", name="onos-0", observed=observed)
        for status in ("created", "restarted")
    ]
    for event in [*events, events[0]]:  # the first one twice: at least once delivery
        producer.produce(topic, key="ns/onos-0", value=json.dumps(event))
    producer.flush(30)
    command = [
        sys.executable,
        str(EXAMPLES / "consume_events.py"),
        "--bootstrap",
        testenv.broker.bootstrap,
        "--topic",
        topic,
        "--service",
        "onos",
        "--timeout",
        "60",
        "--max-events",
        "2",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "created   ns/onos-0 10.0.0.7",
        "  -> re-push onos state to onos-0",
        "restarted ns/onos-0 10.0.0.7",
        "  -> re-push onos state to onos-0",
    ]
