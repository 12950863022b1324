"""Events recorded just before the translator stops reach the API server (network/translator.py): the cluster's one
recorder (network/translation_runtime.py), which the pods and the load balancers record with, is flushed at its
stop, as the Events a user reads in `kubectl describe` say what the translation last did."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from kuberaven.kube.event_recorder import NORMAL, InvolvedObject
from kuberaven.model import Database
from kuberaven.network.backend import BackendError, NetworkOptions
from kuberaven.network.translator import NetworkTranslator

SENDING = 0.2  # seconds the stand-in API server takes to store an Event


class ApiServer:
    """Stores Events, slowly."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        assert (method, path.rpartition("/")[2]) == ("POST", "events"), (method, path)
        await asyncio.sleep(SENDING)
        self.events.append(body["reason"])
        return body


class Unreachable:
    """A cloud that does not answer yet: the translator waits for its infrastructure until stopped."""

    name = "embedded"
    pools = trunks = port_status = None  # none of the optional drivers

    def __init__(self) -> None:
        self.asked = threading.Event()  # set in the translator's worker thread

    def ensure_infrastructure(self, cluster: str, options: NetworkOptions) -> Any:
        self.asked.set()
        raise BackendError("cloud unreachable")

    def close(self) -> None:
        pass


async def test_events_recorded_just_before_stop_are_flushed(database: Database) -> None:
    server, backend = ApiServer(), Unreachable()
    translator = NetworkTranslator(server, database, "c", backend)  # type: ignore[arg-type]  # the stand-ins
    running = asyncio.create_task(translator.run())
    await asyncio.wait_for(asyncio.to_thread(backend.asked.wait), 10)
    pod = InvolvedObject("v1", "Pod", "shop", "web", "u-web")
    service = InvolvedObject("v1", "Service", "shop", "web", "u-svc")
    translator.pods.events.record(pod, NORMAL, "PortReady", "port p1 10.64.3.5: kuberaven-cni wires it")
    translator.load_balancers.events.record(service, NORMAL, "LoadBalancerReady", "load balancer lb-1")
    translator.stop()
    await asyncio.wait_for(running, 10)
    assert sorted(server.events) == ["LoadBalancerReady", "PortReady"]
