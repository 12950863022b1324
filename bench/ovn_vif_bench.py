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
  wave     (first, before slo) ``--pods`` pods at ``--slo-rate`` and, with no pause, ``--pods`` more at
           ``--burst-rate``, into a third namespace as old; the runtime never retries an ADD (ovn_stream_burst.py);
           then its sandboxes and namespace are deleted, and the next phase starts once the pools are at rest
  scale    ``--scale`` pods at ``--scale-rate``, in namespaces of 100 (0: skipped)
Footprint: kuberaven-cni's start-up (beside the interpreter's), pod GETs at the API server per ADD, the agent's
RSS, the free pooled ports per node and namespace once idle.

    python bench/ovn_vif_bench.py [--pods 60] [--slo-rate 2] [--burst-rate 20] [--churn 30] [--churn-rate 10]
                                  [--scale 300] [--scale-rate 10] [--age 120] [--keep-logs DIR] [--only-wave]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import sqlalchemy as sa

from common import openstack_datapath, print_table, watch_from_now
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, NetworkTranslation
from kuberaven.network.pools import KIND as POOLED
from kuberaven.network.vif import VIF_ANNOTATION, Vif
from kuberaven.testing.namespaces import create_namespace
from ovn_runtime import (
    Row,
    Runtime,
    at_rest,
    create_pods,
    measured,
    ms,
    outcome,
    paced,
    phase,
    split,
    timed_row,
    with_server,
)
from ovn_stream_burst import stream_then_burst
from raw_ovn import pool_port_ids, raw_ports
from tests.datapath import DataPath, delete_netns

SCALE_NAMESPACE_PODS = 100  # pods of the scale phase per namespace


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
    start_up = None if args.only_wave else plugin_start_up()
    with openstack_datapath(args.keep_logs) as datapath:
        kube = KubeClient.from_kubeconfig(datapath.env["kubeconfig"])
        wave = Runtime(datapath, "bench-wave")
        runtimes = (
            [wave] if args.only_wave else [Runtime(datapath, "bench-slo"), Runtime(datapath, "bench-burst"), wave]
        )
        try:
            # The baseline first (once its namespace's pools are made), its ports deleted: the bench's namespaces
            # then age with Neutron otherwise idle.
            raw, plugged, created = await raw_ports(datapath, kube, "bench-raw", args.pods)
            rows: list[Row] = [
                (f"raw: {args.pods} ports, bulk create + plug + ovn-installed", ms(raw), "", ""),
                ("raw: the same ports plugged at once → ovn-installed", ms(plugged), "", ""),
                (f"raw: Neutron's bulk request of {args.pods} (idle)", f"{args.pods / created:.1f} ports/s", "", ""),
            ]
            await kube.request("DELETE", "/api/v1/namespaces/bench-raw")
            for runtime in runtimes:
                await create_namespace(kube, runtime.namespace)
            await asyncio.sleep(args.age)
            idle = idle_pools(datapath.daemon.database_url)
            # The wave first, as a new user meets it: a fresh Neutron, a namespace --age s old. Then its pods and
            # namespace go, and the phases after it start once the pools are at rest, on the data path they had.
            rows += await stream_then_burst(kube, wave, args, raw, args.pods / created)
            if not args.only_wave:
                await cleared(kube, wave)
                await at_rest(datapath)
                rows += await slo_burst_restart(datapath, kube, args, raw, runtimes)
            rows += await scale_phase(kube, datapath, args, raw) if args.scale else []
            rows += footprint(datapath, idle, *start_up) if start_up is not None else []
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


async def cleared(kube: KubeClient, runtime: Runtime) -> None:
    """The runtime's sandboxes deleted (their pairs with them) and its namespace (its network and ports)."""
    delete_netns(list(runtime.sandboxes.values()))
    runtime.deleted.update(runtime.added)
    await kube.request("DELETE", f"/api/v1/namespaces/{runtime.namespace}")


async def slo_burst_restart(
    datapath: DataPath, kube: KubeClient, args: argparse.Namespace, raw: list[float], runtimes: list[Runtime]
) -> list[Row]:
    """The SLO's stream and the churn, saturation, and the restart, in the first two runtimes' namespaces."""
    slo, burst = runtimes[:2]
    rows = await slo_and_churn(kube, slo, args, raw)
    names = [f"b{i:03d}" for i in range(args.pods)]
    times = await measured(kube, burst, names, args.burst_rate)
    rows.append(timed_row(f"saturation: {args.pods} pods at {args.burst_rate:g}/s", times, raw))
    rows += [("  " + outcome(burst, names), "", "", ""), split(burst, names)]
    return rows + await restart_phase(datapath, kube, args, runtimes)


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
    parser.add_argument("--only-wave", action="store_true", help="the raw baseline and the wave phase alone")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print_table(asyncio.run(run(args)))
    print(json.dumps(vars(args), default=str))


if __name__ == "__main__":
    main()
