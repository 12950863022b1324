"""The engine survives what real clusters do: restarts, 410 Gone, stalls, signals."""

from __future__ import annotations

import asyncio
import signal
import time
import urllib.request
from pathlib import Path

from kuberaven.kube.client import KubeClient
from kuberaven.kube.reflector import ReflectorOptions, WatchEvent
from kuberaven.testing.env import TestEnv
from kuberaven.watch.informers import InformerFactory, Joined
from kuberaven.watch.informers import running as running_informers
from kuberaven.watch.positions import MemoryPositionStore
from kuberaven.watch.watcher import Watcher, WatchTarget
from tests.helpers import Recorder, configmap, daemon_running, eventually, http_status, metric, running


async def _retrying(call, attempts: int = 100):  # type: ignore[no-untyped-def]
    """The API server is coming back up: retry a call until it answers."""
    for _ in range(attempts):
        try:
            return await call()
        except Exception:
            await asyncio.sleep(0.2)
    return await call()


async def test_apiserver_restart_mid_watch_loses_and_repeats_nothing(
    kube: KubeClient, namespace: str, testenv: TestEnv
) -> None:
    recorder = Recorder()
    watcher = Watcher(WatchTarget("v1", "ConfigMap", namespace=namespace), recorder, name=f"restart-{namespace}")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    options = ReflectorOptions(backoff_initial=0.2, backoff_max=1.0)
    async with running(kube, [watcher], reflector=options) as engine:
        await engine.wait_synced(timeout=30)
        for i in range(10):
            await kube.request("POST", path, body=configmap(f"before{i}", namespace))
        await recorder.wait_for(lambda events: len(events) >= 10)

        testenv.control_plane.restart_apiserver()

        for i in range(10):
            await _retrying(lambda i=i: kube.request("POST", path, body=configmap(f"after{i}", namespace)))
        await kube.request("DELETE", f"{path}/before0")
        await recorder.wait_for(lambda events: len(recorder.of(f"{namespace}/before0")) == 2, timeout=60)
        await recorder.wait_for(lambda events: sum(e.key.startswith(f"{namespace}/after") for e in events) == 10)
        # A duplicate comes from the stream before anything made later: a marker made last, handled, and the engine
        # idle mean that every event delivered up to it has been handled.
        await kube.request("POST", path, body=configmap("marker", namespace))
        await recorder.wait_for(lambda events: bool(recorder.of(f"{namespace}/marker")))
        await engine.wait_idle(timeout=10)
    ours = [e for e in recorder.events if "kube-root-ca" not in e.key]  # the controller-manager's own
    seen = [(e.key, e.type, e.object["metadata"]["resourceVersion"]) for e in ours]
    assert len(seen) == len(set(seen)), "an event was delivered twice"
    adds = sorted(key for key, kind, _ in seen if kind == "ADDED")
    made = [f"{namespace}/before{i}" for i in range(10)] + [f"{namespace}/after{i}" for i in range(10)]
    assert adds == sorted([*made, f"{namespace}/marker"])
    assert [kind for key, kind, _ in seen if key == f"{namespace}/before0"] == ["ADDED", "DELETED"]


async def test_410_gone_after_downtime_relists_and_reports_what_vanished(
    kube: KubeClient, namespace: str, testenv: TestEnv
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for name in ("keep", "change", "remove"):
        await kube.request("POST", path, body=configmap(name, namespace, v="1"))
    store = MemoryPositionStore()
    first = Recorder()
    target = WatchTarget("v1", "ConfigMap", namespace=namespace)
    async with running(kube, [Watcher(target, first, name=f"gone1-{namespace}")], positions=store) as engine:
        await engine.wait_synced(timeout=30)
    assert await store.load(str(target)) is not None

    # While kuberaven is down: changes, then history compacted and the
    # watch cache rebuilt, so the stored resourceVersion is gone for good.
    await kube.request("PUT", f"{path}/change", body=configmap("change", namespace, v="2"))
    await kube.request("DELETE", f"{path}/remove")
    await kube.request("POST", path, body=configmap("new", namespace, v="1"))
    for i in range(20):  # move etcd's revision well past the stored one
        await kube.request("POST", path, body=configmap(f"filler{i}", namespace))
        await kube.request("DELETE", f"{path}/filler{i}")
    testenv.control_plane.compact_etcd()
    testenv.control_plane.restart_apiserver()
    await _retrying(lambda: kube.request("GET", path, params={"limit": 1}))  # the API server answers again

    gone_before = metric("kuberaven_watch_gone_total", resource="configmaps")
    second = Recorder()
    options = ReflectorOptions(backoff_initial=0.2, backoff_max=1.0)
    async with running(
        kube, [Watcher(target, second, name=f"gone2-{namespace}")], positions=store, reflector=options
    ) as engine:
        await second.wait_for(lambda events: any(e.type == "DELETED" for e in events), timeout=60)
        await engine.wait_idle(timeout=10)
    assert metric("kuberaven_watch_gone_total", resource="configmaps") > gone_before
    by_name = {e.object["metadata"]["name"]: e for e in second.events}
    assert by_name["remove"].type == "DELETED" and by_name["remove"].relisted
    assert by_name["change"].type == "MODIFIED" and by_name["change"].object["data"] == {"v": "2"}
    assert by_name["new"].type == "ADDED"
    assert "keep" not in by_name  # unchanged objects are not replayed
    assert "kube-root-ca.crt" not in by_name
    assert not any(name.startswith("filler") for name in by_name)


async def test_resume_from_stored_position_replays_nothing(kube: KubeClient, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(5):
        await kube.request("POST", path, body=configmap(f"cm{i}", namespace))
    store = MemoryPositionStore()
    target = WatchTarget("v1", "ConfigMap", namespace=namespace)
    async with running(kube, [Watcher(target, Recorder(), name=f"pos1-{namespace}")], positions=store) as engine:
        await engine.wait_synced(timeout=30)
    await kube.request("POST", path, body=configmap("later", namespace, k="v"))
    second = Recorder()
    async with running(kube, [Watcher(target, second, name=f"pos2-{namespace}")], positions=store) as engine:
        await second.wait_for(lambda events: len(events) >= 1)
        # A replay would come from the stream before anything made now: once a marker is handled, it has.
        await kube.request("POST", path, body=configmap("marker", namespace))
        await second.wait_for(lambda events: bool(second.of(f"{namespace}/marker")))
        await engine.wait_idle(timeout=10)
    replayed = [(e.type, e.object["metadata"]["name"]) for e in second.events]
    assert replayed == [("ADDED", "later"), ("ADDED", "marker")]


async def test_stalled_stream_is_detected_and_recovered(kube: KubeClient, namespace: str, testenv: TestEnv) -> None:
    recorder = Recorder()
    watcher = Watcher(WatchTarget("v1", "ConfigMap", namespace=namespace), recorder, name=f"stall-{namespace}")
    options = ReflectorOptions(
        inactivity_timeout=2.0, connect_timeout=2.0, backoff_initial=0.2, backoff_max=1.0, not_ready_after=1.0
    )
    reconnects_before = metric("kuberaven_watch_reconnects_total", resource="configmaps")
    async with running(kube, [watcher], reflector=options) as engine:
        await engine.wait_synced(timeout=30)
        assert engine.ready()
        testenv.control_plane.pause_apiserver()
        try:
            # A silent stream must make /readyz fail: not_ready_after (1 s) past the last news, it does.
            await eventually(lambda: not engine.ready(), timeout=10)
            # A reopen begun just before the resume could still succeed: keep the server stopped until one has
            # failed (each fails within the 2 s timeouts) and been counted.
            for _ in range(100):
                if metric("kuberaven_watch_reconnects_total", resource="configmaps") > reconnects_before:
                    break
                await asyncio.sleep(0.1)
        finally:
            testenv.control_plane.resume_apiserver()
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        await _retrying(lambda: kube.request("POST", path, body=configmap("after-stall", namespace)))
        await recorder.wait_for(lambda events: any(e.key == f"{namespace}/after-stall" for e in events), 30)
        for _ in range(50):
            if engine.ready():
                break
            await asyncio.sleep(0.1)
        assert engine.ready()
    assert metric("kuberaven_watch_reconnects_total", resource="configmaps") > reconnects_before


def test_daemon_serves_health_and_stops_cleanly_on_sigterm(testenv: TestEnv, tmp_path: Path) -> None:
    with daemon_running(testenv.control_plane.kubeconfig, tmp_path) as daemon:
        assert http_status(f"{daemon.url}/healthz") == 200
        with urllib.request.urlopen(f"{daemon.url}/metrics", timeout=2) as response:
            body = response.read()
        # One cold-start list of pods, shared by every component that reads them (inventory, network translator).
        assert b'kuberaven_relists_total{resource="pods"} 1.0' in body
        # /readyz turned 200: the summary of the initial lists is logged (by a task that looks every 0.2 s).
        deadline = time.monotonic() + 5
        while "initial sync done in" not in daemon.output() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "initial sync done in" in daemon.output()
        daemon.process.send_signal(signal.SIGTERM)
        assert daemon.process.wait(15) == 0
    assert "stopped cleanly" in daemon.output()


class _Collected:
    """A shared informer's consumer that keeps what it is given (a ReflectorListener)."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self.synced = asyncio.Event()

    def on_event(self, event: WatchEvent) -> None:
        self.events.append(event)

    def on_bookmark(self, resource_version: str) -> None:
        pass

    def on_synced(self) -> None:
        self.synced.set()

    async def wait_for_room(self) -> None:
        pass

    def names(self, kind: str, relisted: bool) -> list[str]:
        return sorted(e.object["metadata"]["name"] for e in self.events if e.type == kind and e.relisted is relisted)


async def test_a_consumer_joining_again_after_a_crash_is_given_every_object_again(
    kube: KubeClient, namespace: str
) -> None:
    """A restarted consumer lost what it had been given and not handled: the shared informer gives it
    (and its siblings, for whom the repeat is a no-op) every object once more, then the live stream."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(3):
        await kube.request("POST", path, body=configmap(f"cm{i}", namespace))
    factory = InformerFactory(kube)
    informer = factory.informer(WatchTarget("v1", "ConfigMap", namespace=namespace))
    crashing, sibling = _Collected(), _Collected()
    informer.declare("crashing", crashing, ["data"])
    informer.declare("sibling", sibling, None)
    informer.join("crashing", Joined())
    informer.join("sibling", Joined())
    ours = [f"cm{i}" for i in range(3)]

    def given(collected: _Collected, kind: str, relisted: bool) -> list[str]:
        return [n for n in collected.names(kind, relisted) if n in ours or n == "later"]

    async with running_informers(factory, owned=True):
        await asyncio.wait_for(asyncio.gather(crashing.synced.wait(), sibling.synced.wait()), 30)
        assert given(crashing, "ADDED", True) == ours and given(crashing, "MODIFIED", True) == []
        relists = metric("kuberaven_relists_total", resource="configmaps")

        informer.join("crashing", Joined())  # what a supervised consumer does when it is restarted
        for collected in (crashing, sibling):

            def repeated(c: _Collected = collected) -> None:
                assert given(c, "MODIFIED", True) == ours

            await eventually(repeated, timeout=20)
        assert metric("kuberaven_relists_total", resource="configmaps") == relists + 1
        await kube.request("POST", path, body=configmap("later", namespace, k="v"))
        for collected in (crashing, sibling):

            def live(c: _Collected = collected) -> None:
                assert given(c, "ADDED", False) == ["later"]

            await eventually(live, timeout=20)
    assert crashing.events[-1].object == {  # its own fields only, as declared
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "data": {"k": "v"},
        "metadata": crashing.events[-1].object["metadata"],
    }
