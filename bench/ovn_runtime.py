"""The node's container runtime as ovn_vif_bench.py plays it (bench/), and how a phase's pods are timed and told.

a pod created bound to the node ──► the runtime's watch sees it ──► ip netns add ──► kuberaven-cni ADD (its
own thread, tests/datapath.py run_process), "try again later" retried after RETRY s unless ``retries`` is
off ──► the pod's first TCP connection to its namespace's server pod, tried once
a phase's pods ──► ms(), ratio(), split(), outcome(): the rows of the bench's table
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from common import percentile, watch_from_now
from kuberaven.cni.spec import host_ifname
from kuberaven.kube.client import KubeClient
from kuberaven.network.vif import VIF_ANNOTATION
from kuberaven.testing.kubelet import MERGE_PATCH
from raw_ovn import pool_port_ids
from tests.datapath import DataPath, cni, connect, run_process, serving
from tests.helpers import PAUSE

Row = tuple[str, str, str, str]
TRY_AGAIN = 11  # CNI's "try again later": a kubelet retries the sandbox
RETRY = 1.0  # seconds before an ADD that said so is tried again
SERVER_PORT = 8080
ADD_TIMEOUT = 600.0
SANDBOX_FINALIZER = "bench.kuberaven.io/sandbox"  # a deleted pod's, until the runtime's DEL of its sandbox is done
REST_LOOKS = 6  # looks, a second apart, that see no pool port made: the pools at rest (a bulk request takes 1-3 s)


async def netns_add(name: str) -> None:
    code, _, err = await run_process(["ip", "netns", "add", name])
    assert code == 0, f"ip netns add {name} failed: {err.strip()}"


@dataclass
class Runtime:
    """The node's container runtime for one namespace: ADD for every pod its watch sees, then one TCP try."""

    datapath: DataPath
    namespace: str
    server: str | None = None  # the address of the namespace's server pod
    posted: dict[str, float] = field(default_factory=dict)  # pod → when the API server answered its POST
    post_took: dict[str, float] = field(default_factory=dict)  # pod → seconds its POST took, sent to answered
    scheduled: dict[str, float] = field(default_factory=dict)
    vif_seen: dict[str, float] = field(default_factory=dict)  # pod → when its watch first showed the VIF
    added: dict[str, float] = field(default_factory=dict)
    called: dict[str, float] = field(default_factory=dict)  # pod → when its last (successful) ADD was started
    first_try: dict[str, int] = field(default_factory=dict)  # pod → ADD calls until one succeeded
    answered: dict[str, bool] = field(default_factory=dict)  # pod → its first TCP connection was answered
    failed: dict[str, str] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    handed: set[str] = field(default_factory=set)  # pods whose ADD took a gone pod's parked pair
    sandboxes: dict[str, str] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    retries: bool = True  # False: a runtime that never retries an ADD (its first answer counts)

    def sandbox(self, name: str) -> str:
        """The pod's network namespace: one per bench run, namespace and pod."""
        return f"krvb{os.getpid() % 1000}-{self.namespace.removeprefix('bench-')}-{name}"

    def pod(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if name not in self.vif_seen and VIF_ANNOTATION in (pod["metadata"].get("annotations") or {}):
            self.vif_seen[name] = time.time()
        if name not in self.scheduled and pod["metadata"].get("deletionTimestamp") is None and name != "server":
            self.scheduled[name] = time.time()
            self.tasks.append(asyncio.create_task(self.add(name)))

    async def add(self, name: str) -> None:
        self.sandboxes[name] = sandbox = self.sandbox(name)
        try:
            await netns_add(sandbox)
        except AssertionError as error:
            self.failed[name] = str(error)
            return
        deadline, calls = time.monotonic() + ADD_TIMEOUT, 0
        while True:
            calls += 1
            self.called[name] = time.time()
            code, answer = await cni(self.datapath, "ADD", sandbox, self.namespace, name)
            if code == 0:
                break
            if not self.retries or (answer or {}).get("code") != TRY_AGAIN or time.monotonic() > deadline:
                self.failed[name] = f"ADD exited {code}: {answer}"
                return
            await asyncio.sleep(RETRY)
        self.added[name], self.first_try[name] = time.time(), calls
        if answer is not None and answer["interfaces"][0]["name"] != host_ifname(f"ctr-{sandbox}", "eth0"):
            self.handed.add(name)
        if self.server is not None:
            self.answered[name] = await connect(sandbox, self.server, SERVER_PORT) is not None

    async def delete(self, kube: KubeClient, name: str) -> None:
        """A pod deleted as a rollout deletes it and a kubelet tears it down: the DELETE marks it terminating, the
        DEL of its sandbox follows, then the pod goes. (The environment's fake kubelet finalizes a terminating pod
        at once; SANDBOX_FINALIZER holds the pod until the DEL is done, as a kubelet's order does.)"""
        path = f"/api/v1/namespaces/{self.namespace}/pods/{name}"
        held = {"metadata": {"finalizers": [SANDBOX_FINALIZER]}}
        await kube.request("PATCH", path, body=held, content_type=MERGE_PATCH)
        await kube.request("DELETE", path)
        await cni(self.datapath, "DEL", self.sandboxes[name], self.namespace, name)
        self.deleted.add(name)
        await kube.request("PATCH", path, body={"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)

    def latencies(self, names: list[str] | None = None) -> list[float]:
        chosen = names if names is not None else list(self.added)
        return [self.added[n] - self.scheduled[n] for n in chosen if n in self.added]

    async def settle(self, names: list[str]) -> None:
        deadline = time.monotonic() + ADD_TIMEOUT
        while not all(n in self.added or n in self.failed for n in names):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.namespace}: {len(self.added)} added, {len(self.failed)} failed")
            await asyncio.sleep(0.05)
        await asyncio.gather(*[t for t in self.tasks if not t.done()])


async def create_pods(kube: KubeClient, runtime: Runtime, names: list[str], rate: float) -> None:
    """Pods bound to the runtime's node at creation, ``rate`` a second, each POST in its own task; when each POST
    was answered, and how long it took, go into the runtime."""
    node, namespace = runtime.datapath.node, runtime.namespace

    async def create(name: str) -> None:
        body = {"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": PAUSE}]}}
        sent = time.time()
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)
        runtime.posted[name] = time.time()
        runtime.post_took[name] = runtime.posted[name] - sent

    await paced(names, rate, create)


async def paced(names: list[str], rate: float, action: Callable[[str], Coroutine[Any, Any, None]]) -> None:
    """``action`` for each of ``names``, ``rate`` a second, each in its own task; until all are done."""
    started, tasks = time.monotonic(), []
    for i, name in enumerate(names):
        await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
        tasks.append(asyncio.create_task(action(name)))
    await asyncio.gather(*tasks)


def ms(values: list[float]) -> str:
    return f"{percentile(values, 0.5):.0f} / {percentile(values, 0.99):.0f} ms" if values else "-"


def ratio(values: list[float], baseline: list[float]) -> str:
    if not values or not baseline:
        return ""
    p50, p99 = (percentile(values, q) / percentile(baseline, q) for q in (0.5, 0.99))
    return f"{p50:.1f}x / {p99:.1f}x"


def split(runtime: Runtime, names: list[str]) -> Row:
    """Where a phase's time went: the translator's part (scheduled → VIF annotation seen by the runtime's watch)
    and the node's (VIF seen → ADD returned; negative where ADD returned before the watch showed the VIF); the
    runtime's own (scheduled → its last ADD started: the sandbox made, earlier calls retried) and that call's."""
    vif = [runtime.vif_seen[n] - runtime.scheduled[n] for n in names if n in runtime.vif_seen]
    node = [runtime.added[n] - runtime.vif_seen[n] for n in names if n in runtime.added and n in runtime.vif_seen]
    started = [runtime.called[n] - runtime.scheduled[n] for n in names if n in runtime.added]
    call = [runtime.added[n] - runtime.called[n] for n in names if n in runtime.added]
    text = (
        f"  scheduled → VIF {ms(vif)}; VIF → ADD {ms(node)}; scheduled → ADD started {ms(started)}, its call {ms(call)}"
    )
    return (text, "", "", "")


def outcome(runtime: Runtime, names: list[str]) -> str:
    first = sum(1 for n in names if runtime.first_try.get(n) == 1)
    answered = sum(1 for n in names if runtime.answered.get(n))
    tcp = f"{answered}/{len(names)} first TCP answered" if runtime.server else "no TCP tried"
    failed = [runtime.failed[n] for n in names if n in runtime.failed]
    handed = sum(1 for n in names if n in runtime.handed)
    return (
        f"created at {achieved(runtime, names)}, {first}/{len(names)} ADD first call, {handed} took a parked pair, "
        f"{tcp}, {len(failed)} failed {failed[:2] if failed else ''}"
    )


def achieved(runtime: Runtime, names: list[str]) -> str:
    """The rate the API server took the pods at: their POSTs' answers over the phase (a saturated node lags the
    rate asked for)."""
    posted = sorted(runtime.posted[n] for n in names if n in runtime.posted)
    if len(posted) < 2 or posted[-1] <= posted[0]:
        return "-"
    took = [runtime.post_took[n] for n in names if n in runtime.post_took]
    return f"{(len(posted) - 1) / (posted[-1] - posted[0]):.1f}/s (a POST {ms(took)})"


async def with_server(runtime: Runtime, kube: KubeClient) -> Any:
    """The namespace's server pod, wired by ADD, answering on SERVER_PORT."""
    await create_pods(kube, runtime, ["server"], 1)
    runtime.sandboxes["server"] = sandbox = runtime.sandbox("server")
    await netns_add(sandbox)
    for _ in range(120):
        code, answer = await cni(runtime.datapath, "ADD", sandbox, runtime.namespace, "server")
        if code == 0:
            break
        await asyncio.sleep(RETRY)
    assert code == 0 and answer is not None, answer
    runtime.server = answer["ips"][0]["address"].split("/")[0]
    return serving(sandbox, SERVER_PORT, "server")


async def phase(kube: KubeClient, runtime: Runtime, names: list[str], rate: float) -> list[float]:
    await create_pods(kube, runtime, names, rate)
    await runtime.settle(names)
    return runtime.latencies(names)


def timed_row(what: str, times: list[float], raw: list[float]) -> Row:
    return (what, ms(times), ms(raw) + " (raw)", ratio(times, raw))


async def measured(
    kube: KubeClient, runtime: Runtime, names: list[str], rate: float, server: bool = True
) -> list[float]:
    """``names`` created at ``rate`` into the runtime's namespace (with its server pod, if asked), all ADDed."""
    path = f"/api/v1/namespaces/{runtime.namespace}/pods"
    async with watch_from_now(kube, path, runtime.pod), contextlib.AsyncExitStack() as stack:
        if server:
            await stack.enter_async_context(await with_server(runtime, kube))
        return await phase(kube, runtime, names, rate)


async def at_rest(datapath: DataPath) -> float:
    """Seconds until the pools make no port: Neutron's count of pool ports unchanged over REST_LOOKS looks."""
    started, counts = time.monotonic(), []
    while time.monotonic() - started < ADD_TIMEOUT:
        counts.append(len(await asyncio.to_thread(pool_port_ids, datapath)))
        if len(counts) >= REST_LOOKS and len(set(counts[-REST_LOOKS:])) == 1:
            return time.monotonic() - started
        await asyncio.sleep(1.0)
    raise TimeoutError(f"the pools still made ports after {ADD_TIMEOUT:g} s")
