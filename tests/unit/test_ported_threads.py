"""Concurrent takes and deletes of pods' ports from many threads (network/reconcilers/pods.py's ``ported``).

Batches record in worker threads which pod holds a port (a take); reconciles on the event loop drop the entry of
a pod whose port went (a delete), if it still names that pod. Here each delete meets a take of the same name by a
newer pod in another thread, right between its check and its drop (the worst interleaving, made certain by a map
that holds the loop there a while): the newer pod's entry must survive, or its next reconcile would not find its
row and would make it a second port.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

from kuberaven.kube.uids import compact_uid
from kuberaven.model import Database
from kuberaven.network.backend import NetworkOptions
from kuberaven.network.drivers.ports import Port, PortRequest
from kuberaven.network.reconcilers.context import TranslationContext
from kuberaven.network.reconcilers.pods import PodsReconciler
from kuberaven.network.rules.translate import PodPort
from kuberaven.network.state import TranslationStore
from tests.unit.test_pool_refill_failures import NAMESPACE

PODS = 8  # names, each deleted on the loop and taken in a thread of its own at once
WINDOW = 0.2  # seconds a delete's check waits for the take of its name to land before it drops the entry


class Ports:
    """The embedded backend's ports, as far as the batch calls it."""

    name = "embedded"

    def __init__(self) -> None:
        self.made: list[str] = []

    def ensure_ports(self, requests: list[PortRequest]) -> list[Port]:
        self.made += [request.device_id for request in requests]
        return [Port(f"port-{r.device_id}", r.address or "10.64.3.9", "fa:16:3e:00:00:01") for r in requests]

    def delete(self, kind: str, resource: str) -> None:
        pass


class Interleaving(dict[str, Any]):
    """``ported``, holding the loop between a delete's check and its drop (a get on the loop's thread once the
    name's old pod was forgotten) until the take of that name ran in its thread, or WINDOW passed."""

    def __init__(self, entries: dict[str, Any]) -> None:
        super().__init__(entries)
        self.forgotten: set[str] = set()
        self.opened: dict[str, threading.Event] = {key: threading.Event() for key in entries}
        self.taken: dict[str, threading.Event] = {key: threading.Event() for key in entries}

    def get(self, key: str, default: Any = None) -> Any:
        found = super().get(key, default)
        if threading.current_thread() is threading.main_thread() and key in self.forgotten:
            self.forgotten.discard(key)
            self.opened[key].set()
            self.taken[key].wait(WINDOW)
        return found


class Deleted:
    """The pods lister, every pod deleted."""

    async def fetch(self, key: str) -> None:
        return None


async def test_concurrent_takes_and_deletes_of_ports_from_many_threads(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path}/k.db")
    database.prepare()
    loop = asyncio.get_running_loop()
    backend = Ports()
    store = TranslationStore(database, "c", backend)  # type: ignore[arg-type]  # the stand-in
    store.save_many([("Namespace", "ns-uid", None, "shop", NAMESPACE)])

    def blocking(call: Any, *args: Any) -> Any:
        return loop.run_in_executor(None, call, *args)

    context = TranslationContext(None, store, backend, NetworkOptions(), "c", blocking, None, None, None)  # type: ignore[arg-type]  # no API
    pods = PodsReconciler(context, Deleted())  # type: ignore[arg-type]  # the stand-in lister
    names = [f"shop/web-{i}" for i in range(PODS)]
    old = {name: str(uuid.uuid4()) for name in names}
    new = {name: str(uuid.uuid4()) for name in names}
    ported = Interleaving({name: compact_uid(old[name]) for name in names})
    pods.ported = ported
    forget = pods._forget

    def forgotten(uid: str, pod: dict[str, Any] | None) -> bool:
        done = forget(uid, pod)
        ported.forgotten.update(name for name in names if old[name] == uid)
        return done

    pods._forget = forgotten  # type: ignore[method-assign]

    def take(name: str, address: str) -> None:
        ported.opened[name].wait(5 * WINDOW)
        pods._ensure_ports([PodPort(name, address, new[name], "shop", name.partition("/")[2])])
        ported.taken[name].set()

    takers = [threading.Thread(target=take, args=(name, f"10.64.3.{10 + i}")) for i, name in enumerate(names)]
    for taker in takers:
        taker.start()
    try:
        await asyncio.gather(*(pods.reconcile(name) for name in names))
    finally:
        for taker in takers:
            await asyncio.to_thread(taker.join)
        database.dispose()
    assert sorted(backend.made) == sorted(new.values()), "each newer pod got one port"
    assert {name: pods.ported.get(name) for name in names} == {name: compact_uid(new[name]) for name in names}
