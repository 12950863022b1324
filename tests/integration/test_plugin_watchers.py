"""A watcher from an installed plugin package (the example's WATCHERS) gets its resource's events
from the shared informer, the same list+watch another consumer of that resource uses."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from kuberaven.kube.client import KubeClient
from kuberaven.plugins import plugin_watchers
from kuberaven.provisioning.manifests import SLICE_LABEL
from kuberaven.runtime.health import Component
from kuberaven.watch.engine import Engine
from kuberaven.watch.informers import InformerFactory
from kuberaven.watch.watcher import Watcher, WatchTarget
from tests.helpers import PAUSE, Recorder, component_running, eventually


@contextlib.asynccontextmanager
async def shared(kube: KubeClient, *engines: list[Watcher]) -> AsyncIterator[InformerFactory]:
    """Engines on one InformerFactory, as ``kuberaven run`` builds them."""
    factory = InformerFactory(kube, "plugin-test")
    running = [Engine(kube, watchers, informers=factory) for watchers in engines]
    async with contextlib.AsyncExitStack() as stack:
        components: list[Component] = [*running, factory]
        for component in components:
            await stack.enter_async_context(component_running(component))
        yield factory


async def test_an_installed_plugins_watcher_gets_events_from_the_shared_informer(
    kube: KubeClient, namespace: str
) -> None:
    from simpleexampleservice.watchers import POD_PHASE_WATCHER, POD_PHASES

    assert POD_PHASE_WATCHER in plugin_watchers()  # found through the package's entry point
    other = Recorder()
    async with shared(kube, plugin_watchers(), [Watcher(WatchTarget("v1", "Pod"), other, name="other")]) as factory:
        for name, labels in (("ours", {SLICE_LABEL: "simpleexample-hello"}), ("theirs", {})):
            body = {
                "metadata": {"name": name, "labels": labels},
                "spec": {"containers": [{"name": "c", "image": PAUSE}]},
            }
            await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)

        def running() -> None:
            assert POD_PHASES.phases.get(f"{namespace}/ours") == "Running", POD_PHASES.phases

        await eventually(running, timeout=60)
        assert f"{namespace}/theirs" not in POD_PHASES.phases  # not one of the plugin's pods
        await other.wait_for(lambda events: any(e.key == f"{namespace}/theirs" for e in events))
        [pods] = [s for s in factory.status() if s.target == "v1/Pod"]  # one list+watch for both consumers
        assert isinstance(pods.consumers, tuple) and len(pods.consumers) == 2, pods
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/ours", body={"gracePeriodSeconds": 0})

        def forgotten() -> None:
            assert f"{namespace}/ours" not in POD_PHASES.phases

        await eventually(forgotten, timeout=30)
