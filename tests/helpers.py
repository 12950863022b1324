"""Helpers for integration tests: record events, run a loop or the whole daemon for the length of a block."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openstack.exceptions
import sqlalchemy as sa
from prometheus_client import REGISTRY

from kuberaven.events.options import RelayOptions
from kuberaven.events.relay import OutboxRelay
from kuberaven.kube.client import KubeClient
from kuberaven.kube.reflector import WatchEvent
from kuberaven.model import Database, OutboxEvent
from kuberaven.network.vif import VIF_ANNOTATION, Vif
from kuberaven.runtime.health import Component
from kuberaven.testing.free_ports import free_port
from kuberaven.watch.engine import Engine, EngineOptions
from kuberaven.watch.watcher import Watcher

POLL = 0.1  # seconds between an ``eventually`` check's tries
BACKEND_POLL = 0.5  # the same for a check that calls a real backend (off_loop)


class Recorder:
    """A translate() that records events and lets a test wait for a condition."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self._changed = asyncio.Event()

    async def __call__(self, event: WatchEvent) -> None:
        self.events.append(event)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[list[WatchEvent]], bool], timeout: float = 20) -> None:
        async def loop() -> None:
            while not predicate(self.events):
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            summary = [(e.type, e.key, e.object["metadata"].get("resourceVersion")) for e in self.events[-20:]]
            raise AssertionError(f"condition not met within {timeout}s; last events: {summary}") from None

    def of(self, key: str) -> list[WatchEvent]:
        return [e for e in self.events if e.key == key]


@contextlib.asynccontextmanager
async def component_running(component: Component) -> AsyncIterator[None]:
    """Any of the daemon's loops (run/stop) running in a task for the length of a block."""
    task = asyncio.create_task(component.run())
    try:
        yield
    finally:
        component.stop()
        await asyncio.wait_for(task, 30)


@contextlib.asynccontextmanager
async def running(client: KubeClient, watchers: Iterable[Watcher], **options: Any) -> AsyncIterator[Engine]:
    positions = options.pop("positions", None)
    engine = Engine(client, watchers, positions=positions, options=EngineOptions(**options))
    async with component_running(engine):
        yield engine


def configmap(name: str, namespace: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def outbox_statuses(database: Database, key: str) -> list[str]:
    """The statuses of the pod events written for ``key`` (namespace/name), oldest first."""
    with database.session() as session:
        query = sa.select(OutboxEvent.status).where(OutboxEvent.key == key).order_by(OutboxEvent.id)
        return list(session.scalars(query))


def metric(name: str, **labels: str) -> float:
    """A sample's current value in the process-wide Prometheus registry (0 if never set)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


@contextlib.asynccontextmanager
async def inventory_running(client: KubeClient, database: Any, **options: Any) -> AsyncIterator[Any]:
    """An Inventory of the default cluster for the length of a block, synced on entry."""
    from kuberaven.inventory.component import Inventory, InventoryOptions

    on_commit = options.pop("on_commit", None)
    inventory = Inventory(client, database, options=InventoryOptions(**options), on_commit=on_commit)
    async with component_running(inventory):
        await asyncio.wait_for(inventory.wait_synced(), 60)
        yield inventory


async def eventually(
    check: Callable[[], Any], timeout: float = 30, interval: float | None = None, off_loop: bool = False
) -> Any:
    """Retry a check (sync or async) until it holds; its result is returned.

    A check asserts. A falsy result other than None (a predicate's False, an empty list) counts as not met
    yet: it is retried like a failed assertion, so a check written as a predicate waits for it to hold
    instead of passing at once. So is an OpenStack object not found, raised as is or as the cause of a
    kuberaven BackendError: a check that reads one by an ID it read just before (a port's security group)
    may find it deleted while the system converges. Whatever still fails at the deadline is raised.

    ``off_loop``: a sync check runs in a worker thread, for checks that make blocking calls (a real
    Neutron's or Octavia's API, a few hundred ms each): on the loop they would hold up the component
    under test, which runs on the same loop, for most of the wait (py-spy: the network tests' loop was
    blocked in their checks in 41 of 43 samples). Such a check must touch no object of the loop's, and is
    retried every BACKEND_POLL seconds unless ``interval`` says otherwise: each try costs the servers CPU that
    the component under test needs."""
    pause = interval if interval is not None else BACKEND_POLL if off_loop else POLL
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            result = await asyncio.to_thread(check) if off_loop else check()
            if asyncio.iscoroutine(result):
                result = await result
            assert result is None or result, f"the check returned {result!r}"
            return result
        except Exception as error:
            if not _not_yet(error) or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(pause)


def _not_yet(error: Exception) -> bool:
    """What ``eventually`` retries: a failed assertion, an OpenStack object not found (or a BackendError it caused)."""
    gone = openstack.exceptions.NotFoundException
    return isinstance(error, AssertionError | gone) or isinstance(error.__cause__, gone)


async def eventually_off_loop(check: Callable[[], Any], timeout: float = 30, interval: float | None = None) -> Any:
    """``eventually`` with sync checks in a worker thread: for modules whose checks call a real backend."""
    return await eventually(check, timeout, interval, off_loop=True)


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """Run an ASGI app under a real uvicorn on a free loopback port for the block; yields its base URL."""
    import threading

    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the web server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@dataclass
class Daemon:
    """A ``kuberaven run`` subprocess started by daemon_running()."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    database_url: str

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def daemon_running(
    kubeconfig: Path, workdir: Path, *args: str, env: dict[str, str] | None = None, ready_within: float = 60
) -> Iterator[Daemon]:
    """``kuberaven run`` with its own database and port, ready (/readyz 200) on entry, SIGTERMed on exit.

    Its own database: the default one in the working directory would keep watch
    positions from earlier runs (and then nothing is listed). Output goes to a
    file so that a chatty daemon never blocks on a full pipe.
    """
    url = f"http://127.0.0.1:{free_port()}"
    database_url = f"sqlite:///{workdir}/k.db"
    env = {**os.environ, "KUBERAVEN_LISTEN": url.removeprefix("http://"), "KUBERAVEN_DB": database_url, **(env or {})}
    command = [sys.executable, "-m", "kuberaven", "run", "--kubeconfig", str(kubeconfig), *args]
    log = workdir / "kuberaven-run.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    daemon = Daemon(url, process, log, database_url)
    try:
        deadline = time.monotonic() + ready_within
        while http_status(f"{url}/readyz") != 200:
            assert process.poll() is None, f"kuberaven run exited: {daemon.output()}"
            assert time.monotonic() < deadline, f"kuberaven run not ready in {ready_within}s: {daemon.output()}"
            time.sleep(0.2)
        yield daemon
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def http_status(url: str) -> int:
    """The status of a GET, 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


PAUSE = "registry.local:5000/library/pause:3.2"


async def bound_pod(kube: KubeClient, namespace: str, name: str, node: str, **spec: Any) -> dict[str, Any]:
    """A pod bound to ``node`` at creation, as the scheduler would bind it (deleted at once: no grace period)."""
    body = {
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": PAUSE}],
            "terminationGracePeriodSeconds": 0,
            **spec,
        },
    }
    return await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)


async def vif_of(kube: KubeClient, namespace: str, name: str, timeout: float = 30) -> Vif:
    """The pod's VIF annotation, once the translator has written it."""

    async def annotated() -> Vif:
        pod = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        text = (pod["metadata"].get("annotations") or {}).get(VIF_ANNOTATION)
        assert text is not None, pod["metadata"]
        return Vif.from_json(text)

    return await eventually(annotated, timeout=timeout)


def kuberaven(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`kuberaven ARGS` in a child process, as a user runs it: its exit code, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "kuberaven", *args], input=stdin, capture_output=True, text=True, timeout=60
    )


async def kuberaven_events(kube: KubeClient, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Kubernetes Events kuberaven recorded on object ``name``: what `kubectl describe` lists of it."""
    found = await kube.request("GET", f"/api/v1/namespaces/{namespace}/events", params={"limit": 500})
    return [
        e for e in found["items"] if e["involvedObject"]["name"] == name and e["source"].get("component") == "kuberaven"
    ]


def write_events(database: Database, cluster: str, keys: list[str], rounds: range) -> list[OutboxEvent]:
    """Outbox rows as the inventory writes them: for each round, one "updated" event of each key, in order."""
    ids = [(str(uuid.uuid4()), n, key) for n in rounds for key in keys]
    events = [
        OutboxEvent(
            event_id=event_id,
            cluster=cluster,
            key=key,
            status="updated",
            # the event_id in the payload, as in every real event: kafka_messages reads until each arrived
            payload={"event_id": event_id, "key": key, "round": n},
            created=time.time(),
        )
        for event_id, n, key in ids
    ]
    with database.session() as session:
        session.add_all(events)
        session.commit()
    return events


class RelayThread:
    """An outbox relay running in a thread of its own, as the daemon runs it, for the length of a ``with``."""

    def __init__(self, database: Database, options: RelayOptions) -> None:
        self.relay = OutboxRelay(database, options)
        self.thread = threading.Thread(target=self.relay.run, daemon=True)

    def __enter__(self) -> OutboxRelay:
        self.thread.start()
        return self.relay

    def __exit__(self, *_: object) -> None:
        self.relay.stop()
        self.thread.join(60)  # it marks what was delivered before it stops
        assert not self.thread.is_alive()


def waiting_for_a_lock(pid: int) -> bool:
    """Whether ``pid`` is blocked on a file lock (/proc/locks lists a blocked request as "N: -> FLOCK …")."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "->" and fields[5] == str(pid):
            return True
    return False


TRACED_MEASURES = 3
# About twice the store's depth (step → update → slim → encode), so that every allocation a step makes keeps the step's
# own frame in its traceback.
TRACED_FRAMES = 8


def least_traced_bytes(prepare: Callable[[], Callable[[], Any]], measures: int = TRACED_MEASURES) -> int:
    """The bytes that a step leaves allocated: the least of ``measures`` runs, each of a fresh ``prepare()``.
    Only allocations with the step's own frame in their traceback count: tracemalloc sees every thread of the
    process, and an xdist worker may still run threads of earlier tests."""
    sizes = []
    for _ in range(measures):
        step = prepare()
        gc.collect()
        tracemalloc.start(TRACED_FRAMES)
        try:
            step()
            gc.collect()
            snapshot = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        mine = step.__code__.co_filename  # compared as is: tracemalloc.Filter's fnmatch of every frame is slow
        sizes.append(sum(t.size for t in snapshot.traces if any(f.filename == mine for f in t.traceback)))
    return min(sizes)
