"""Nested pods on real VMs: how long a pod scheduled on a VM waits for its network, beside bare pods.

    python bench/ovn_nested_bench.py [--pods 20] [--rate 10] [--stream-seconds 30]

`kuberaven testenv up --openstack --nested 2` (two QEMU guests as nested nodes, testing/vm.py) and `kuberaven
run` on it, with pools as large as the burst (tests/datapath.py's environment). Each pod is bound to its node at
creation (its scheduling) and its ADD is called at once, in the VM for a nested pod (kuberaven-cni in the guest,
as a runtime there calls it), on the host for a bare one; a pod's time is from its creation to ADD's return:

* burst: ``--pods`` nested pods on two VMs at ``--rate`` pods/s, and half as many bare pods in the same run;
* the agent's own time per ADD, from its log ("ADD … done in"), in the guest and on the host;
* stream: 1 pod/s per VM for ``--stream-seconds``, against the SLO (p99 ≤ 5 s);
* the VMs' boot (QEMU started → command server answering) and their QEMU's resident memory;
* one Python start importing kuberaven-cni, in a guest and on the host: what emulation costs each call.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import print_table
from kuberaven.kube.client import KubeClient
from kuberaven.testing.namespaces import create_namespace
from tests.datapath import DataPath, Sandboxes, create_pod, environment, sandboxes
from tests.integration.datapath.nested.guest import GuestSandboxes, guest_sandboxes, in_vm

SLO_P99 = 5.0  # seconds from scheduled to ADD returned, at the 99th percentile
POOLS = {"KUBERAVEN_NETWORK_POOL_MIN": "12", "KUBERAVEN_NETWORK_POOL_MAX": "24"}  # the burst's pods per pool
POOLS_FILLED_WITHIN = 180.0  # seconds for the pools to be made before the burst
STREAM_BOUND = 60.0  # seconds an ADD in a guest may run before the runtime kills it: the pod counts as not wired
AGENT_ADD = re.compile(r"ADD (\S+)/(\S+) \S+: done in ([0-9.]+) s")
Row = tuple[str, str, str]  # what, the numbers, a note
HEADER = ("measure", "result", "note")


def quantiles(seconds: list[float]) -> tuple[float, float]:
    """p50 and p99 (the largest of fewer than 100 samples)."""
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return statistics.median(ordered), p99


def agent_adds(log: Path, namespace: str) -> list[float]:
    """The seconds each ADD of ``namespace``'s pods took in an agent, from its log."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [float(m.group(3)) for m in AGENT_ADD.finditer(text) if m.group(1) == namespace]


def qemu_rss_mib(vm: dict[str, Any]) -> float:
    """The resident memory of the VM's QEMU (the process whose command line names the VM's directory)."""
    listed = subprocess.run(["ps", "-eo", "rss=,args="], capture_output=True, text=True, check=True).stdout
    rows = [line.split(None, 1) for line in listed.splitlines()]
    return next(int(rss) / 1024 for rss, args in rows if args.startswith("qemu-system") and vm["dir"] in args)


async def timed(create: Any, wire: Any) -> float:
    """Seconds from the pod's creation (bound to its node: scheduled) to its ADD's return."""
    started = time.monotonic()
    await create()
    await wire()
    return time.monotonic() - started


async def paced(calls: list[Any], rate: float) -> list[float]:
    """``calls`` started at ``rate`` per second, all awaited: their results in order."""
    tasks, started = [], time.monotonic()
    for index, call in enumerate(calls):
        await asyncio.sleep(max(0.0, index / rate - (time.monotonic() - started)))
        tasks.append(asyncio.create_task(call()))
    return list(await asyncio.gather(*tasks))


async def burst(dp: DataPath, kube: KubeClient, guests: GuestSandboxes, boxes: Sandboxes, ns: str,
                pods: int, rate: float) -> tuple[list[float], list[float]]:  # fmt: skip
    """``pods`` nested pods (alternating VMs) and ``pods // 2`` bare ones, interleaved, at ``rate`` pods/s:
    (nested pods' seconds, bare pods' seconds)."""
    one, two = dp.nested
    calls, kinds = [], []
    for index in range(pods + pods // 2):
        name = f"p{index:03d}"
        if index % 3 == 2:
            calls.append(lambda name=name: timed(lambda: create_pod(kube, dp, ns, name), lambda: boxes.wire(ns, name)))
            kinds.append("bare")
        else:
            vm = (one, two)[index % 3]
            calls.append(functools.partial(_nested_timed, guests, ns, name, vm))
            kinds.append("nested")
    seconds = await paced(calls, rate)
    return [s for s, k in zip(seconds, kinds, strict=True) if k == "nested"], [
        s for s, k in zip(seconds, kinds, strict=True) if k == "bare"
    ]


async def _nested_timed(guests: GuestSandboxes, ns: str, name: str, vm: dict[str, Any]) -> float:
    """Seconds from creation to ADD's return; infinite for a pod not wired within STREAM_BOUND (a guest whose
    CPU or memory the calls outgrew: the SLO is missed, and the run still ends with its table)."""
    started = time.monotonic()
    try:  # creates the pod (bound to the VM's node), then ADD in the guest, killed at STREAM_BOUND (the guests')
        await guests.pod(ns, name, vm)
    except (AssertionError, TimeoutError) as error:
        print(f"{vm['node']} {name}: not wired: {str(error)[:200]}", flush=True)
        return float("inf")
    return time.monotonic() - started


async def stream(dp: DataPath, guests: GuestSandboxes, ns: str, seconds: float) -> list[float]:
    """1 pod/s per VM for ``seconds``: each one's seconds from creation to ADD's return."""
    calls = [
        functools.partial(_nested_timed, guests, ns, f"s{i:03d}-{v}", vm)
        for i in range(int(seconds))
        for v, vm in enumerate(dp.nested)
    ]
    return await paced(calls, rate=len(dp.nested))


async def import_seconds(vm: dict[str, Any]) -> tuple[float, float]:
    """One Python start importing kuberaven-cni: in the guest, and on the host."""
    program = "import kuberaven.cni.plugin"
    started = time.monotonic()
    code, _, err = await in_vm(vm, vm["python"], "-c", program)
    guest = time.monotonic() - started
    assert code == 0, err
    started = time.monotonic()
    await asyncio.to_thread(subprocess.run, [sys.executable, "-c", program], check=True)
    return guest, time.monotonic() - started


async def run(args: argparse.Namespace) -> list[Row]:
    with environment(nested=2, pools=POOLS) as dp:
        kube = KubeClient.from_kubeconfig(dp.env["kubeconfig"])
        try:
            boots = ", ".join(f"{vm['node']} {vm['boot_seconds']} s" for vm in dp.nested)
            rows: list[Row] = [("VM boot (QEMU started → command server answering)", boots, "both at once")]
            async with guest_sandboxes(dp, kube, add_timeout=STREAM_BOUND) as guests, sandboxes(dp, kube) as boxes:
                ns = "bench-nested"
                await create_namespace(kube, ns)
                for index, vm in enumerate(dp.nested):  # the namespace's network and pools: made before
                    await guests.pod(ns, f"warm-{index}", vm)
                await boxes.pod(ns, "warm-bare")
                await asyncio.sleep(min(POOLS_FILLED_WITHIN, args.settle))
                nested, bare = await burst(dp, kube, guests, boxes, ns, args.pods, args.rate)
                rows += _rows(dp, ns, nested, bare)
                print_table(rows, HEADER)  # the burst's, before the stream, which may outgrow the guests
                streamed = await stream(dp, guests, ns, args.stream_seconds)
                verdict = "meets" if quantiles(streamed)[1] <= SLO_P99 else "misses"
                rows.append((f"stream: 1 pod/s per VM (n={len(streamed)})", _p50_p99(streamed),
                             f"{verdict} the SLO p99 ≤ 5 s"))  # fmt: skip
                guest, host = await import_seconds(dp.nested[0])
                rows.append(("python -c 'import kuberaven.cni.plugin'", f"guest {guest:.2f} s, host {host:.2f} s", ""))
                memory = ", ".join(f"{vm['node']} {qemu_rss_mib(vm):.0f} MiB" for vm in dp.nested)
                rows.append(("QEMU resident memory, after the run", memory, "-m 256M, tb-size 64"))
            return rows
        finally:
            await kube.close()


def _rows(dp: DataPath, ns: str, nested: list[float], bare: list[float]) -> list[Row]:
    """The burst's times, and the agents' own time per ADD (from their logs)."""
    directory = Path(dp.env["dir"])
    in_guests = [s for vm in dp.nested for s in agent_adds(directory / f"kuberaven-node-{vm['node']}.log", ns)]
    on_host = agent_adds(directory / "kuberaven-node.log", ns)
    rows = []
    for what, seconds in (("burst: nested, scheduled → ADD returned", nested),
                          ("burst: bare beside them, scheduled → ADD returned", bare),
                          ("the agent's own ADD, in the guests", in_guests),
                          ("the agent's own ADD, on the host (bare pods)", on_host)):  # fmt: skip
        rows.append((f"{what} (n={len(seconds)})", _p50_p99(seconds), ""))
    return rows


def _p50_p99(seconds: list[float]) -> str:
    p50, p99 = quantiles(seconds)
    return f"p50 {p50:.2f} s, p99 {p99:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=20, help="nested pods of the burst (bare ones: half as many)")
    parser.add_argument("--rate", type=float, default=10.0, help="the burst's pods per second")
    parser.add_argument("--stream-seconds", type=float, default=30.0, help="how long 1 pod/s per VM runs")
    parser.add_argument(
        "--settle", type=float, default=POOLS_FILLED_WITHIN, help="seconds the pools get before the burst"
    )
    rows = asyncio.run(run(parser.parse_args()))
    print_table(rows, HEADER)


if __name__ == "__main__":
    main()
