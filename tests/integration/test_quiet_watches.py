"""A quiet cluster is not an outage: idle watches stay ready, and a change at any moment arrives at once.

The 1.20 API server sends no bookmark for an idle resource, so an idle watch's stream goes silent
until the inactivity timeout. These tests shorten that timeout (and the server-side watch length) so
that a few seconds hold many quiet periods, and keep the default backoff, which an idle watch used to
climb (0.8 s, 1.6 s, 3.2 s, ...) until /readyz flapped.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.reflector import ReflectorOptions, WatchEvent
from kuberaven.runtime.health import readiness
from kuberaven.testing.env import TestEnv
from kuberaven.watch.engine import Engine
from kuberaven.watch.watcher import Watcher, WatchTarget
from tests.helpers import Recorder, configmap, eventually, metric, running

# Short enough for many quiet periods in a few seconds; the outage threshold is a few of them, so a
# watch that backed off after quiet periods (as it used to) would turn not ready within the test.
QUIET = ReflectorOptions(inactivity_timeout=1.0, watch_timeout=(3.0, 4.0), not_ready_after=2.0)
# A change reaches the consumer within this (usually milliseconds); the old backoff reached 13 s and more.
USUAL_LATENCY = 1.5


async def test_idle_watches_stay_ready_and_changes_arrive_at_once(
    kube: KubeClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kuberaven.kube.reflector")
    changes = Recorder()
    busy = Watcher(WatchTarget("v1", "ConfigMap", namespace=namespace), changes, name=f"quiet-{namespace}")
    # Nothing ever matches this one: it stays silent the whole test.
    idle_target = WatchTarget("v1", "Secret", namespace=namespace, label_selector="kuberaven.io/never=1")
    idle = Watcher(idle_target, Recorder(), name=f"idle-{namespace}")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    not_ready_samples: list[dict[str, object]] = []

    async def sample_readiness(engine: Engine) -> None:
        while True:
            ready, body = readiness([engine])
            if not ready:
                not_ready_samples.append(body)
            await asyncio.sleep(0.05)

    async with running(kube, [busy, idle], reflector=QUIET) as engine:
        await engine.wait_synced(timeout=30)
        sampler = asyncio.create_task(sample_readiness(engine))
        try:
            # Changes at moments spread over the quiet periods (each gap is several inactivity timeouts,
            # and the offsets walk across the phase of the reconnect cycle).
            for i, gap in enumerate((2.5, 3.3, 4.1, 2.9, 3.7, 4.5)):
                await asyncio.sleep(gap)
                made = time.monotonic()
                await kube.request("POST", path, body=configmap(f"late{i}", namespace))

                def arrived(events: list[WatchEvent], key: str = f"{namespace}/late{i}") -> bool:
                    return any(e.key == key for e in events)

                await changes.wait_for(arrived)
                latency = time.monotonic() - made
                assert latency < USUAL_LATENCY, f"late{i} took {latency:.1f}s to arrive"
        finally:
            sampler.cancel()
    assert not_ready_samples == [], f"not ready while idle: {not_ready_samples[:1]}"
    reopened = [r for r in caplog.records if "watch stream ended" in r.getMessage()]
    assert len(reopened) >= 10, "the test did not go through many quiet periods"
    assert all("ReadTimeout: ;" not in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "quiet periods logged as trouble"


async def test_a_lasting_outage_turns_not_ready_and_the_log_names_the_cause(
    kube: KubeClient, namespace: str, testenv: TestEnv, caplog: pytest.LogCaptureFixture
) -> None:
    """The other side: a server that stops answering is not quiet; past the threshold the watch is not ready."""
    caplog.set_level(logging.INFO, logger="kuberaven.kube.reflector")
    recorder = Recorder()
    watcher = Watcher(WatchTarget("v1", "ConfigMap", namespace=namespace), recorder, name=f"outage-{namespace}")
    options = ReflectorOptions(
        inactivity_timeout=1.0, connect_timeout=1.0, not_ready_after=2.0, backoff_initial=0.2, backoff_max=1.0
    )
    failures_before = metric("kuberaven_watch_reconnects_total", resource="configmaps")
    async with running(kube, [watcher], reflector=options) as engine:
        await engine.wait_synced(timeout=30)
        testenv.control_plane.pause_apiserver()
        paused = time.monotonic()
        try:
            # Looked at every 50 ms: ready at each look until the outage has lasted not_ready_after, then not.
            await eventually(lambda: not engine.ready(), timeout=15, interval=0.05)
            lasted = time.monotonic() - paused
            assert lasted >= options.not_ready_after, f"not ready after an outage of {lasted:.1f}s"
            # The outage goes on until a failed reconnect has said so, naming its cause (checked below).
            await eventually(lambda: any("not ready, no watch for" in r.getMessage() for r in caplog.records))
        finally:
            testenv.control_plane.resume_apiserver()
        for _ in range(100):
            if engine.ready():
                break
            await asyncio.sleep(0.1)
        assert engine.ready()
    assert metric("kuberaven_watch_reconnects_total", resource="configmaps") > failures_before
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("not ready, no watch for" in w and "Timeout" in w for w in warnings), warnings
    assert all(not w.rstrip().endswith(":") and ": ;" not in w for w in warnings), warnings
