"""One runtime per cluster (network/translation_runtime.py): the translator's reconcilers and the ports' status
share one store, one set of threads, one Event recorder and one map of reports; the last runnable to end flushes
the Events and closes the threads; reconcilers reach the pods reconciler's queue through a typed handle
(watch/reconciler.py's Enqueue), from the loop or a worker thread, never by its name."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable
from typing import Any

from kuberaven.kube.event_recorder import NORMAL, InvolvedObject
from kuberaven.model import Database
from kuberaven.network.activation import PortActivation
from kuberaven.network.backend import NetworkOptions
from kuberaven.network.drivers.port_status import PortStatus
from kuberaven.network.translation_runtime import TranslationRuntime
from kuberaven.network.translator import NetworkTranslator
from kuberaven.watch.reconciler import Enqueue

BOUND = 5.0  # seconds a test waits for what should take far less
POD = InvolvedObject("v1", "Pod", "shop", "web", "u-web")


class ApiServer:
    """Stores Events once let through."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.let_through = asyncio.Event()

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        assert (method, path.rpartition("/")[2]) == ("POST", "events"), (method, path)
        await self.let_through.wait()
        self.events.append(body["reason"])
        return body


class Cloud:
    """A backend with ports' status and no pools; it counts its closes."""

    name = "openstack"
    pools = trunks = None

    def __init__(self) -> None:
        self.port_status = self
        self.closed = 0

    def port_statuses(self, cluster: str, ports: list[str] | None = None, inactive: bool = False) -> dict:
        return {}

    def close(self) -> None:
        self.closed += 1


def test_the_reconcilers_and_the_ports_status_share_one_store_threads_recorder_and_reports(
    database: Database,
) -> None:
    cloud = Cloud()
    translator = NetworkTranslator(ApiServer(), database, "c", cloud, NetworkOptions(policies=True))  # type: ignore[arg-type]  # stand-ins
    activation = PortActivation(translator.runtime, cloud.port_status)
    runtime = translator.runtime
    policies = translator.policies
    assert policies is not None
    reconcilers = [translator.namespaces, translator.pods, translator.load_balancers, policies]
    assert {id(runtime.store), id(activation.store), *(id(r.store) for r in reconcilers)} == {id(runtime.store)}
    blocking = {id(activation._blocking), id(translator._blocking), *(id(r._blocking) for r in reconcilers)}
    assert blocking == {id(runtime.blocking)}
    assert {id(r.events) for r in reconcilers} | {id(translator.pods.vifs.events)} == {id(runtime.events)}
    assert translator.pods.reports is activation.reports is runtime.reports
    assert translator.load_balancers.ranges.pod_queue is translator.pods.pod_queue is runtime.pod_queue
    assert policies.pod_queue is runtime.pod_queue
    # The engine's controllers read the handles their reconcilers were declared with.
    handles = {c.name: c.reconciler.enqueue for c in translator.engine.controllers}
    assert handles["network-pods"] is runtime.pod_queue
    assert handles["network-policies"] is policies.enqueue


async def test_the_last_runnable_to_end_flushes_the_events_and_closes_the_threads(database: Database) -> None:
    server, cloud = ApiServer(), Cloud()
    runtime = TranslationRuntime(server, database, "c", cloud, workers=2)  # type: ignore[arg-type]  # stand-ins
    leave = {"translator": asyncio.Event(), "activation": asyncio.Event()}
    names: list[str] = []
    both_in = asyncio.Event()

    async def runnable(name: str) -> None:
        async with runtime.running():
            names.append(await runtime.blocking(lambda: threading.current_thread().name))
            if len(names) == len(leave):
                both_in.set()
            await leave[name].wait()

    running = {name: asyncio.create_task(runnable(name)) for name in leave}
    await asyncio.wait_for(both_in.wait(), BOUND)
    runtime.events.record(POD, NORMAL, "PortReady", "port p1 10.64.3.5: kuberaven-cni wires it")
    leave["activation"].set()
    await asyncio.wait_for(running["activation"], BOUND)  # not held by the Event in flight: not the last
    assert cloud.closed == 0 and server.events == []
    assert (await runtime.blocking(lambda: threading.current_thread().name)).startswith("network")
    leave["translator"].set()
    asyncio.get_running_loop().call_later(0.1, server.let_through.set)
    await asyncio.wait_for(running["translator"], BOUND)
    assert server.events == ["PortReady"]  # flushed by the last one's end
    assert cloud.closed == 1
    # A run after that (the supervisor's, after a crash) has threads again.
    async with runtime.running():
        assert (await runtime.blocking(lambda: threading.current_thread().name)).startswith("network")
    assert cloud.closed == 2


async def test_a_report_queues_its_pod_through_the_handle_before_and_while_a_controller_reads_it(
    database: Database,
) -> None:
    runtime = TranslationRuntime(None, database, "c", Cloud(), workers=2)  # type: ignore[arg-type]  # stand-ins
    queued: list[Hashable] = []
    report = PortStatus("p1", "u-web", "ACTIVE", "ovs", "node-1")
    runtime.reports.report("shop/early", report)  # before the engine runs: it waits in the handle
    runtime.pod_queue.connect(queued.append)
    assert queued == ["shop/early"]
    runtime.reports.report("shop/web", report)
    await asyncio.to_thread(runtime.pod_queue, "shop/from-a-thread")  # lb_ranges.py's syncs run in threads
    await asyncio.sleep(0)  # the thread's key is handed to the loop
    assert queued == ["shop/early", "shop/web", "shop/from-a-thread"]
    assert runtime.reports.reported("p1") == report
    runtime.pod_queue.disconnect()
    runtime.pod_queue("shop/later")
    assert queued[-1] == "shop/from-a-thread"  # waits for the next controller


def test_keys_waiting_in_a_handle_are_kept_once_each_in_order() -> None:
    handle = Enqueue()
    for key in ["a", "b", "a", "c"]:
        handle(key)
    got: list[Hashable] = []

    async def connect() -> None:
        handle.connect(got.append)

    asyncio.run(connect())
    assert got == ["a", "b", "c"]
