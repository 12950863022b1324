"""The Raven engine against the real local control plane: sync, order, failures."""

from __future__ import annotations

import asyncio
import itertools

from kuberaven.kube.client import KubeClient
from kuberaven.kube.reflector import ReflectorOptions, WatchEvent
from kuberaven.watch.watcher import Registry, Watcher, WatchTarget
from tests.helpers import Recorder, configmap, eventually, metric, running


async def test_cold_start_delivers_every_existing_object_then_synced(kube: KubeClient, namespace: str) -> None:
    for i in range(120):  # more than one page at page_size=50
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=configmap(f"cm{i}", namespace))
    recorder = Recorder()
    synced_after: list[int] = []
    watcher = Watcher(WatchTarget("v1", "ConfigMap", namespace=namespace), recorder, name=f"cold-{namespace}")
    watcher.on_synced = lambda: synced_after.append(len(recorder.events))
    async with running(kube, [watcher], reflector=ReflectorOptions(page_size=50)) as engine:
        await engine.wait_synced(timeout=30)
        names = {e.object["metadata"]["name"] for e in recorder.events if e.type == "ADDED"}
        assert {f"cm{i}" for i in range(120)} <= names
        assert synced_after and synced_after[0] >= 120  # synced only after all were handled


async def test_changes_of_one_object_arrive_in_order(kube: KubeClient, namespace: str) -> None:
    recorder = Recorder()
    registry = Registry()
    registry.watcher("v1", "ConfigMap", namespace=namespace, name=f"order-{namespace}")(recorder)
    async with running(kube, registry) as engine:
        await engine.wait_synced(timeout=30)
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        for i in range(5):
            await kube.request("POST", path, body=configmap(f"o{i}", namespace, step="0"))
        for step in range(1, 6):
            for i in range(5):
                await kube.request("PUT", f"{path}/o{i}", body=configmap(f"o{i}", namespace, step=str(step)))
        for i in range(5):
            await kube.request("DELETE", f"{path}/o{i}")
        await recorder.wait_for(lambda events: sum(e.type == "DELETED" for e in events) == 5)
    for i in range(5):
        events = recorder.of(f"{namespace}/o{i}")
        assert events[0].type == "ADDED" and events[-1].type == "DELETED"
        versions = [int(e.object["metadata"]["resourceVersion"]) for e in events]
        assert versions == sorted(versions)
        steps = [e.object["data"]["step"] for e in events if e.type != "DELETED"]
        assert steps == sorted(steps)


async def test_watchers_on_the_same_resource_share_one_list_and_watch(kube: KubeClient, namespace: str) -> None:
    first, second = Recorder(), Recorder()
    target = WatchTarget("v1", "ConfigMap", namespace=namespace)
    relists_before = metric("kuberaven_relists_total", resource="configmaps")
    async with running(
        kube, [Watcher(target, first, name=f"a-{namespace}"), Watcher(target, second, name=f"b-{namespace}")]
    ) as engine:
        assert len(engine.informers) == 1
        await engine.wait_synced(timeout=30)
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=configmap("x", namespace))
        await first.wait_for(lambda events: any(e.key == f"{namespace}/x" for e in events))
        await second.wait_for(lambda events: any(e.key == f"{namespace}/x" for e in events))
    assert metric("kuberaven_relists_total", resource="configmaps") == relists_before + 1


async def test_failing_handler_is_retried_and_other_objects_keep_flowing(kube: KubeClient, namespace: str) -> None:
    attempts: list[float] = []
    handled: list[str] = []

    async def flaky(event: WatchEvent) -> None:
        name = event.object["metadata"]["name"]
        if name == "bad" and len(attempts) < 4:
            attempts.append(asyncio.get_running_loop().time())
            raise RuntimeError("translate failed")
        handled.append(name)

    watcher = Watcher(WatchTarget("v1", "ConfigMap", namespace=namespace), flaky, name=f"flaky-{namespace}")
    async with running(kube, [watcher], retry_initial=0.05) as engine:
        await engine.wait_synced(timeout=30)
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        await kube.request("POST", path, body=configmap("bad", namespace))
        for i in range(10):
            await kube.request("POST", path, body=configmap(f"good{i}", namespace))
        # The good ones are handled while bad waits for its retries (0.05, 0.1, 0.2, 0.4 s): not behind it.
        await eventually(lambda: {f"good{i}" for i in range(10)} <= set(handled), timeout=10, interval=0.01)
        assert "bad" not in handled
        await eventually(lambda: "bad" in handled, timeout=10)
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps[-1] > gaps[0] * 2.5  # 50, 100, 200 ms: backoff, not a hot loop


async def test_custom_resources_are_watched_like_built_in_ones(kube: KubeClient, namespace: str) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "ravens.test.kuberaven.io"},
        "spec": {
            "group": "test.kuberaven.io",
            "names": {"plural": "ravens", "singular": "raven", "kind": "Raven"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
    try:
        await kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
    except Exception as error:  # created by an earlier test in this session
        assert "already exists" in str(error)
    for _ in range(50):
        try:
            await kube.request("GET", "/apis/test.kuberaven.io/v1")
            break
        except Exception:
            await asyncio.sleep(0.2)
    recorder = Recorder()
    watcher = Watcher(
        WatchTarget("test.kuberaven.io/v1", "Raven", namespace=namespace), recorder, name=f"cr-{namespace}"
    )
    async with running(kube, [watcher]) as engine:
        await engine.wait_synced(timeout=30)
        body = {"apiVersion": "test.kuberaven.io/v1", "kind": "Raven", "metadata": {"name": "huginn"}, "spec": {"x": 1}}
        await kube.request("POST", f"/apis/test.kuberaven.io/v1/namespaces/{namespace}/ravens", body=body)
        await recorder.wait_for(lambda events: any(e.key == f"{namespace}/huginn" for e in events))
    assert recorder.events[0].object["spec"] == {"x": 1}


async def test_sync_translate_runs_in_a_thread(kube: KubeClient, namespace: str) -> None:
    import threading

    threads: list[str] = []

    def blocking(event: WatchEvent) -> None:
        threads.append(threading.current_thread().name)

    watcher = Watcher(WatchTarget("v1", "ConfigMap", namespace=namespace), blocking, name=f"sync-{namespace}")
    async with running(kube, [watcher]) as engine:
        await engine.wait_synced(timeout=30)
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=configmap("t", namespace))
        await eventually(lambda: threads, timeout=10)
    assert threads[0] != threading.main_thread().name
