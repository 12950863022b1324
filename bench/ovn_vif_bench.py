"""Pods on the OVN data path: scheduled → kuberaven-cni ADD returned, beside what the machine allows by hand.

Runs `kuberaven testenv up --openstack` (Neutron ML2/OVN, the node's OVN chassis on Open vSwitch's userspace
datapath, the node's agent `kuberaven node`) and `kuberaven run` on it with default settings, as
docs/network.md "Try the OpenStack half locally" says. The bench plays the node's container runtime as a
kubelet does: the moment its watch sees a pod (created bound to the node: creation is its scheduling) it makes
a network namespace and runs kuberaven-cni ADD into it, retrying after 1 s an ADD that answered "try again
later" (as a kubelet retries a sandbox); each of its processes runs on a thread of its own (tests/datapath.py
run_process), as a kubelet's goroutines run them. Right after ADD returns, the pod's first TCP connection to a
server pod of its namespace is tried once (3 s). Each phase reports the rate the API server took its pods at
(their POSTs answered), which a saturated node does not keep.

Phases, in one environment:
  raw      the baseline: the same number of ports made by hand in one bulk request bound to the node, each
           plugged (veth, `ovs-vsctl add-port` with its iface-id) and waited on until ovn-installed; and the same
           pre-made ports plugged at once (the data path alone)
  slo      ``--pods`` pods at ``--slo-rate`` into a namespace two minutes old (Kubernetes' pod start-up SLO)
  burst    ``--pods`` pods at ``--burst-rate`` (saturation) into another namespace as old
  churn    ``--churn`` pods of the slo namespace replaced at ``--churn-rate``, as a rollout replaces them: each
           old pod deleted (terminating, then DEL, then gone) as its replacement is created; started once the
           slo stream's refills are done, so the ports counted are the churn's own
  restart  ``--churn`` pods at ``--churn-rate``; `kuberaven run` SIGKILLed after a third of them, started again
  scale    ``--scale`` pods at ``--scale-rate``, in namespaces of 100 (0: skipped)
Footprint: kuberaven-cni's start-up (beside the interpreter's), pod GETs at the API server per ADD, the agent's
RSS, the free pooled ports per node and namespace once idle.

    python bench/ovn_vif_bench.py [--pods 60] [--slo-rate 2] [--burst-rate 20] [--churn 30] [--churn-rate 10]
                                  [--scale 300] [--scale-rate 10] [--age 120] [--keep-logs DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from common import openstack_datapath, percentile, print_table, watch_from_now
from kuberaven.cni.spec import host_ifname
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, NetworkTranslation
from kuberaven.network.pools import KIND as POOLED
from kuberaven.network.vif import VIF_ANNOTATION, Vif
from kuberaven.testing.kubelet import MERGE_PATCH
from kuberaven.testing.namespaces import create_namespace
from raw_ovn import pool_port_ids, raw_ports
from tests.datapath import DataPath, cni, connect, delete_netns, run_process, serving
from tests.helpers import PAUSE

Row = tuple[str, str, str, str]
TRY_AGAIN = 11  # CNI's "try again later": a kubelet retries the sandbox
RETRY = 1.0  # seconds before an ADD that said so is tried again
SERVER_PORT = 8080
ADD_TIMEOUT = 600.0
SCALE_NAMESPACE_PODS = 100  # pods of the scale phase per namespace
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
            if (answer or {}).get("code") != TRY_AGAIN or time.monotonic() > deadline:
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


def pod_gets(metrics: str) -> float:
    """The API server's count of GETs of single pods (apiserver_request_total), from its /metrics text."""
    total = 0.0
    for line in metrics.splitlines():
        single = 'subresource=""' in line or "subresource=" not in line
        if (
            line.startswith("apiserver_request_total{")
            and 'resource="pods"' in line
            and 'verb="GET"' in line
            and single
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def agent_rss(datapath: DataPath) -> str:
    socket = datapath.openstack["cni_config"]["socket"]
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if " node " in command and socket in command and "kuberaven" in command:
            rss = re.search(r"VmRSS:\s+(\d+) kB", (entry / "status").read_text())
            return f"{int(rss.group(1)) / 1024:.0f} MiB" if rss else "?"
    return "not found"


def plugin_start_up() -> tuple[float, float]:
    """Median seconds of kuberaven-cni VERSION (its whole start-up) and of the bare interpreter, 30 runs each, in a
    virtualenv of their own with kuberaven installed as a node's image has it (not editable, no plugins)."""

    def timed(command: list[str]) -> float:
        runs = []
        for _ in range(30):
            started = time.perf_counter()
            subprocess.run(command, env={"CNI_COMMAND": "VERSION"}, input=b"{}", capture_output=True, check=True)
            runs.append(time.perf_counter() - started)
        return statistics.median(runs)

    with tempfile.TemporaryDirectory(prefix="kuberaven-cni-venv-") as directory:
        venv = Path(directory)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(Path(__file__).parents[1])]
        subprocess.run(pip, check=True, capture_output=True)
        return timed([str(venv / "bin" / "kuberaven-cni")]), timed([str(venv / "bin" / "python"), "-c", "pass"])


def idle_pools(database_url: str) -> Counter[tuple[str, str]]:
    """Free pooled ports per (namespace, node), from the daemon's database."""
    database = Database(database_url)
    try:
        with database.session() as session:
            rows = session.scalars(sa.select(NetworkTranslation).where(NetworkTranslation.kind == POOLED)).all()
            return Counter((row.namespace or "", row.name) for row in rows if row.state.get("pod") is None)
    finally:
        database.dispose()


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


async def slo_and_churn(kube: KubeClient, runtime: Runtime, args: argparse.Namespace, raw: list[float]) -> list[Row]:
    """The SLO's stream, then, once the pools are at rest (the stream's refills done: the ports counted for the churn
    are its own), a third of it replaced as a rollout replaces pods."""
    path = f"/api/v1/namespaces/{runtime.namespace}/pods"
    before = pod_gets((await kube.http.get("/metrics")).text)
    async with watch_from_now(kube, path, runtime.pod), await with_server(runtime, kube):
        names = [f"s{i:03d}" for i in range(args.pods)]
        pooled, started = pool_port_ids(runtime.datapath), time.monotonic()
        times = await phase(kube, runtime, names, args.slo_rate)
        took = time.monotonic() - started
        gets = pod_gets((await kube.http.get("/metrics")).text) - before
        made = len(pool_port_ids(runtime.datapath) - pooled)
        rested = await at_rest(runtime.datapath)
        made_before = pool_port_ids(runtime.datapath)
        churn = [f"c{i:03d}" for i in range(args.churn)]
        # Replaced as a rollout replaces pods: each old pod deleted as its replacement is created.
        old = names[: args.churn]
        deletions = asyncio.ensure_future(paced(old, args.churn_rate, lambda name: runtime.delete(kube, name)))
        churn_times = await phase(kube, runtime, churn, args.churn_rate)
        await deletions
        created = len(pool_port_ids(runtime.datapath) - made_before)
    return [
        timed_row(f"SLO: {args.pods} pods at {args.slo_rate:g}/s, scheduled → ADD", times, raw),
        ("  " + outcome(runtime, names), "", "", ""),
        split(runtime, names),
        (f"  Neutron ports made meanwhile: {made} in {took:.0f} s ({made / took:.1f}/s)", "", "", ""),
        (f"  pod GETs at the API server per ADD: {gets / max(1, len(names)):.2f}", "", "", ""),
        timed_row(
            f"churn: {args.churn} replaced at {args.churn_rate:g}/s ({rested:.0f} s after the SLO)", churn_times, raw
        ),
        (f"  {outcome(runtime, churn)}; Neutron ports made meanwhile: {created}", "", "", ""),
        split(runtime, churn),
    ]


async def at_rest(datapath: DataPath) -> float:
    """Seconds until the pools make no port: Neutron's count of pool ports unchanged over REST_LOOKS looks."""
    started, counts = time.monotonic(), []
    while time.monotonic() - started < ADD_TIMEOUT:
        counts.append(len(await asyncio.to_thread(pool_port_ids, datapath)))
        if len(counts) >= REST_LOOKS and len(set(counts[-REST_LOOKS:])) == 1:
            return time.monotonic() - started
        await asyncio.sleep(1.0)
    raise TimeoutError(f"the pools still made ports after {ADD_TIMEOUT:g} s")


async def scale_phase(kube: KubeClient, datapath: DataPath, args: argparse.Namespace, raw: list[float]) -> list[Row]:
    """``--scale`` pods on the node at ``--scale-rate``, in namespaces of SCALE_NAMESPACE_PODS (a namespace's default
    /24 holds 253 addresses, its pool's free ports among them), each namespace's share at its share of the rate."""
    count = -(-args.scale // SCALE_NAMESPACE_PODS)
    runtimes = [Runtime(datapath, f"bench-scale-{i}") for i in range(count)]
    for runtime in runtimes:
        await create_namespace(kube, runtime.namespace)
    made_before, started = pool_port_ids(datapath), time.monotonic()
    shares = [[f"x{i:03d}" for i in range(args.scale) if i % count == n] for n in range(count)]
    phases = (
        measured(kube, r, names, args.scale_rate / count, server=False)
        for r, names in zip(runtimes, shares, strict=True)
    )
    try:
        times = [t for share in await asyncio.gather(*phases) for t in share]
    finally:  # a phase that timed out leaves no network namespace behind
        for runtime in runtimes:
            delete_netns(list(runtime.sandboxes.values()))
    took, created = time.monotonic() - started, len(pool_port_ids(datapath) - made_before)
    outcomes = "; ".join(outcome(r, names) for r, names in zip(runtimes, shares, strict=True))
    return [
        timed_row(f"scale: {args.scale} pods at {args.scale_rate:g}/s in {count} namespaces", times, raw),
        (f"  {outcomes}; {created} ports made in {took:.0f} s ({created / took:.1f}/s)", "", "", ""),
    ]


def footprint(datapath: DataPath, idle: Counter[tuple[str, str]], start_up: float, interpreter: float) -> list[Row]:
    per_pool = sorted(idle.values()) or [0]
    return [
        (
            "kuberaven-cni start-up (VERSION, as a node installs it), median of 30",
            f"{start_up * 1000:.0f} ms",
            f"{interpreter * 1000:.0f} ms (python -c pass)",
            f"{start_up / interpreter:.1f}x",
        ),
        ("the node agent's RSS at the end", agent_rss(datapath), "", ""),
        (
            f"free pooled ports after --age s ({len(idle)} pools: node × namespace)",
            f"{sum(per_pool)} ({per_pool[0]}-{per_pool[-1]} each)",
            "500 (Neutron's default port quota)",
            "",
        ),
    ]


async def run(args: argparse.Namespace) -> list[Row]:
    start_up, interpreter = plugin_start_up()
    with openstack_datapath(args.keep_logs) as datapath:
        kube = KubeClient.from_kubeconfig(datapath.env["kubeconfig"])
        slo, burst = Runtime(datapath, "bench-slo"), Runtime(datapath, "bench-burst")
        runtimes = [slo, burst]
        try:
            # The baseline first (once its namespace's pools are made), its ports deleted: the bench's namespaces
            # then age with Neutron otherwise idle.
            raw, plugged = await raw_ports(datapath, kube, "bench-raw", args.pods)
            rows: list[Row] = [
                (f"raw: {args.pods} ports, bulk create + plug + ovn-installed", ms(raw), "", ""),
                ("raw: the same ports plugged at once → ovn-installed", ms(plugged), "", ""),
            ]
            await kube.request("DELETE", "/api/v1/namespaces/bench-raw")
            for runtime in runtimes:
                await create_namespace(kube, runtime.namespace)
            await asyncio.sleep(args.age)
            idle = idle_pools(datapath.daemon.database_url)
            rows += await slo_and_churn(kube, slo, args, raw)
            names = [f"b{i:03d}" for i in range(args.pods)]
            rows.append(
                timed_row(
                    f"saturation: {args.pods} pods at {args.burst_rate:g}/s",
                    await measured(kube, burst, names, args.burst_rate),
                    raw,
                )
            )
            rows += [("  " + outcome(burst, names), "", "", ""), split(burst, names)]
            rows += await restart_phase(datapath, kube, args, runtimes)
            rows += await scale_phase(kube, datapath, args, raw) if args.scale else []
            rows += footprint(datapath, idle, start_up, interpreter)
        finally:
            for runtime in runtimes:
                delete_netns(list(runtime.sandboxes.values()))
            await kube.close()
            if args.keep_logs is not None:  # each pod's moments, to lay beside the logs' timestamps
                moments = ("scheduled", "vif_seen", "called", "added")
                timings = {r.namespace: {m: getattr(r, m) for m in moments} for r in runtimes}
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                (args.keep_logs / "timings.json").write_text(json.dumps(timings, indent=1))
    return rows


async def restart_phase(
    datapath: DataPath, kube: KubeClient, args: argparse.Namespace, runtimes: list[Runtime]
) -> list[Row]:
    """``--churn`` pods; `kuberaven run` SIGKILLed after a third, started again: time from the restart to the last
    ADD, and whether any two pods of the bench share an address or a port."""
    runtime = Runtime(datapath, "bench-restart")
    runtimes.append(runtime)
    await create_namespace(kube, runtime.namespace)
    names = [f"r{i:03d}" for i in range(args.churn)]
    async with watch_from_now(kube, f"/api/v1/namespaces/{runtime.namespace}/pods", runtime.pod):
        creating = asyncio.create_task(create_pods(kube, runtime, names, args.churn_rate))
        await asyncio.sleep(len(names) / args.churn_rate / 3)
        datapath.kill_daemon()
        await creating
        datapath.restart_daemon()
        restarted = time.time()
        await runtime.settle(names)
    last = max(runtime.added.values(), default=restarted) - restarted
    vifs = []
    for other in runtimes:
        for name in set(other.added) - other.deleted:
            pod = await kube.request("GET", f"/api/v1/namespaces/{other.namespace}/pods/{name}")
            vifs.append(Vif.from_json(pod["metadata"]["annotations"][VIF_ANNOTATION]))
    shared = (len(vifs) - len({v.ip for v in vifs}), len(vifs) - len({v.port for v in vifs}))
    return [
        (f"restart: {args.churn} pods, `kuberaven run` SIGKILLed mid-way; restart → last ADD", f"{last:.1f} s", "", ""),
        (
            f"  {outcome(runtime, names)}; of {len(vifs)} live pods, {shared[0]} share an IP, {shared[1]} a port",
            "",
            "",
            "",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=60)
    parser.add_argument("--slo-rate", type=float, default=2.0)
    parser.add_argument("--burst-rate", type=float, default=20.0)
    parser.add_argument("--churn", type=int, default=30)
    parser.add_argument("--churn-rate", type=float, default=10.0)
    parser.add_argument("--scale", type=int, default=300)
    parser.add_argument("--scale-rate", type=float, default=10.0)
    parser.add_argument("--age", type=float, default=120.0, help="seconds the namespaces exist before pods come")
    parser.add_argument("--keep-logs", type=Path, help="a folder to copy the environment's logs into at the end")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print_table(asyncio.run(run(args)))
    print(json.dumps(vars(args), default=str))


if __name__ == "__main__":
    main()
