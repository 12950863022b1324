"""Supervision (runtime/supervisor.py): crashed components restart and show in /readyz and /metrics;
one that keeps crashing ends `kuberaven run` with a non-zero exit; the Kafka relay and the database
are part of readiness."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx2 as httpx
import sqlalchemy as sa
from sqlalchemy import event

from kuberaven.component_status import ComponentStatus
from kuberaven.daemon import _readiness
from kuberaven.inventory.component import Inventory
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, OutboxEvent
from kuberaven.runtime.supervisor import Supervisor, SupervisorOptions
from kuberaven.testing.broker import Broker, kafka_messages
from kuberaven.testing.env import TestEnv
from kuberaven.testing.free_ports import free_port
from kuberaven.web.app import create_app
from kuberaven.web.server import WebServer
from tests.helpers import daemon_running, eventually, metric, serving

INJECTED = "injected crash"


class Flaky:
    """A component whose first ``crashes`` runs raise, then it runs until stopped."""

    name = "flaky"

    def __init__(self, crashes: int) -> None:
        self.crashes = crashes
        self.runs = 0
        self._stop = asyncio.Event()
        self._running = False

    async def run(self) -> None:
        self.runs += 1
        if self.runs <= self.crashes:
            raise RuntimeError(INJECTED)
        self._running = True
        try:
            await self._stop.wait()
        finally:
            self._running = False

    def stop(self) -> None:
        self._stop.set()

    def ready(self) -> bool:
        return self._running

    def status(self) -> list[ComponentStatus]:
        return []


def _component(body: dict[str, Any], name: str) -> dict[str, Any]:
    found = next((c for c in body["components"] if c["component"] == name), None)
    assert found is not None, body  # in a check: not listed yet
    return found


async def test_a_crashed_component_restarts_and_shows_in_readyz_and_metrics(
    kube: KubeClient, database: Database
) -> None:
    flaky = Flaky(crashes=2)
    restarts_before = metric("kuberaven_component_restarts_total", component="flaky")  # the registry is per process
    inventory = Inventory(kube, database)
    supervisor: Supervisor
    listen = f"127.0.0.1:{free_port()}"
    web = WebServer(listen, create_app(database, lambda: supervisor.readiness()))
    supervisor = Supervisor([web, inventory, flaky], SupervisorOptions(backoff_initial=1.0, max_crashes=5))
    supervisor.start()
    stopping = asyncio.Event()
    running = asyncio.create_task(supervisor.run(stopping))
    try:
        async with httpx.AsyncClient(base_url=f"http://{listen}", timeout=5) as http:

            async def backing_off() -> None:
                answer = await http.get("/readyz")
                flaky_state = _component(answer.json(), "flaky")
                assert answer.status_code == 503 and flaky_state["state"] == "backing_off", answer.text
                assert flaky_state["last_error"] == f"RuntimeError: {INJECTED}"

            await eventually(backing_off, timeout=10)

            async def recovered() -> None:
                answer = await http.get("/readyz")
                assert answer.status_code == 200, answer.text
                assert _component(answer.json(), "flaky") | {"last_error": None} == {
                    "component": "flaky",
                    "state": "running",
                    "ready": True,
                    "restarts": 2,
                    "last_error": None,
                }
                # The others ran on meanwhile, never restarted.
                assert _component(answer.json(), "inventory/kubernetes")["restarts"] == 0
                assert _component(answer.json(), "web")["restarts"] == 0

            await eventually(recovered, timeout=30)
            metrics = (await http.get("/metrics")).text
            assert f'kuberaven_component_restarts_total{{component="flaky"}} {restarts_before + 2}' in metrics
            assert 'kuberaven_component_state{component="flaky",state="running"} 1.0' in metrics
            assert 'kuberaven_component_state{component="flaky",state="backing_off"} 0.0' in metrics
    finally:
        stopping.set()
        await asyncio.wait_for(running, 30)
    assert flaky.runs == 3


def test_a_component_that_keeps_crashing_ends_kuberaven_run_with_a_non_zero_exit(
    testenv: TestEnv, tmp_path: Path
) -> None:
    # The web server cannot bind: the address is not on this host (TEST-NET-1). Each try is a crash. (A port
    # taken by another listener is refused before anything starts: test_local_run.py.)
    env = dict(
        os.environ,
        KUBERAVEN_DB=f"sqlite:///{tmp_path}/k.db",
        KUBERAVEN_LISTEN="192.0.2.1:8080",
        KUBERAVEN_TOKEN="not-on-loopback-needs-one",
        KUBERAVEN_SUPERVISOR_BACKOFF_INITIAL="0.2",
        KUBERAVEN_SUPERVISOR_MAX_CRASHES="3",
    )
    command = [
        sys.executable,
        "-m",
        "kuberaven",
        "run",
        "--no-network",
        "--kubeconfig",
        str(testenv.control_plane.kubeconfig),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "web crashed after" in done.stderr and "assign requested address" in done.stderr, done.stderr[-3000:]
    assert "web crashed 3 times within 600s; giving up" in done.stderr
    assert "Traceback" in done.stderr  # the cause, logged


def _events(database_url: str, namespace: str) -> list[OutboxEvent]:
    database = Database(database_url)
    try:
        with database.session() as session:
            query = sa.select(OutboxEvent).where(OutboxEvent.key.startswith(f"{namespace}/")).order_by(OutboxEvent.id)
            return list(session.scalars(query))
    finally:
        database.dispose()


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]},
    }


async def test_broker_down_makes_the_daemon_unready_and_every_event_goes_out_when_it_is_back(
    kube: KubeClient, namespace: str, testenv: TestEnv, tmp_path: Path
) -> None:
    broker = Broker(tmp_path / "broker")
    broker.start()
    topic = f"down-{uuid.uuid4().hex[:8]}"
    env = {"KUBERAVEN_KAFKA_UNREACHABLE_AFTER": "2", "KUBERAVEN_TOPIC": topic}
    try:
        args = ("--no-network", "--kafka", broker.bootstrap)
        with daemon_running(testenv.control_plane.kubeconfig, tmp_path, *args, env=env) as daemon:
            async with httpx.AsyncClient(base_url=daemon.url, timeout=5) as http:
                # Down: the process is frozen (SIGSTOP) and answers nothing, then comes back with its data
                # (a restart of this in-memory broker would come back empty).
                assert broker.process is not None
                broker.process.signal(signal.SIGSTOP)
                for i in range(3):
                    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=_pod(f"p{i}"))

                async def unready() -> None:
                    answer = await http.get("/readyz")
                    relay = next((w for w in answer.json()["watches"] if w.get("component") == "relay"), None)
                    assert relay and answer.status_code == 503 and not relay["broker_reachable"], answer.text
                    assert relay["pending"] >= 3  # waiting in the outbox

                await eventually(unready, timeout=60)
                assert not any(e.sent for e in _events(daemon.database_url, namespace))
                broker.process.signal(signal.SIGCONT)

                async def ready_and_sent() -> None:
                    answer = await http.get("/readyz")
                    assert answer.status_code == 200, answer.text
                    events = _events(daemon.database_url, namespace)
                    assert len(events) >= 3 and all(e.sent for e in events), [(e.key, e.sent) for e in events]

                await eventually(ready_and_sent, timeout=90)
            events = _events(daemon.database_url, namespace)
        messages = kafka_messages(broker.bootstrap, topic, {e.event_id for e in events})
        assert {e.event_id for e in events} <= {json.loads(m.value())["event_id"] for m in messages}
    finally:
        broker.stop()


async def test_readyz_reports_a_full_disk_until_a_write_succeeds(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path}/full.db")
    database.prepare()
    database.engine.dispose()
    with database.engine.connect() as connection:
        pages = connection.execute(sa.text("PRAGMA page_count")).scalar_one()

    def limit(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages + 2}")

    event.listen(database.engine, "connect", limit)
    database.engine.dispose()
    flaky = Flaky(crashes=0)
    supervisor = Supervisor([flaky])
    with serving(create_app(database, lambda: _readiness(supervisor, database))) as url:
        supervisor.start()
        stopping = asyncio.Event()
        running = asyncio.create_task(supervisor.run(stopping))
        try:
            async with httpx.AsyncClient(base_url=url, timeout=5) as http:
                await eventually(lambda: _status_is(http, 200), timeout=10)
                try:
                    _write(database, rows=200)
                    raise AssertionError("the writes should have filled the database")
                except sa.exc.OperationalError as error:
                    assert "database or disk is full" in str(error)
                answer = await http.get("/readyz")
                assert answer.status_code == 503
                assert answer.json()["database"]["ok"] is False
                assert "disk full" in answer.json()["database"]["error"]
                event.remove(database.engine, "connect", limit)
                database.engine.dispose()  # space again: new connections have no limit
                _write(database, rows=1)
                assert (await http.get("/readyz")).status_code == 200
        finally:
            stopping.set()
            await asyncio.wait_for(running, 10)
            database.dispose()


async def _status_is(http: httpx.AsyncClient, status: int) -> None:
    answer = await http.get("/readyz")
    assert answer.status_code == status, answer.text


def _write(database: Database, rows: int) -> None:
    for i in range(rows):
        with database.session() as session:
            session.add(
                OutboxEvent(
                    event_id=str(uuid.uuid4()),
                    cluster="kubernetes",
                    key=f"x/{i}",
                    status="created",
                    payload={"pad": "x" * 4000},
                    created=0.0,
                )
            )
