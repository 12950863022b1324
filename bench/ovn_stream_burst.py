"""A steady stream and then a burst, with no pause between them (bench/, a phase of ovn_vif_bench.py).

    the wave namespace (as old as the others, its pools prewarmed), the pools at rest
    ──► ``--pods`` pods at ``--slo-rate`` (the stream) ──► at once ``--pods`` more at ``--burst-rate`` (the burst)
    the runtime: ADD at creation, never retried (its first answer counts), then one TCP try to the server pod
    ──► each part's scheduled → ADD (p50 / p99), ADDs that failed, and the ports the pools made a second in it
        (Neutron's count of pool ports: at the stream's first POST, at the burst's first, at its last ADD),
        beside Neutron's own rate in the raw baseline's one bulk request

Targets (issue 46): every ADD succeeds at its first call, every first TCP try is answered, the stream's p99
≤ STREAM_P99 s and the burst's ≤ BURST_P99 s.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from common import percentile, watch_from_now
from kuberaven.kube.client import KubeClient
from ovn_runtime import Row, Runtime, at_rest, create_pods, outcome, split, timed_row, with_server
from raw_ovn import pool_port_ids
from tests.datapath import DataPath

STREAM_P99 = 5.0  # seconds: the stream's target at p99
BURST_P99 = 15.0  # seconds: the burst's, right after it
MS = 1000.0  # milliseconds a second


async def counted(datapath: DataPath) -> tuple[float, set[str]]:
    """When, and Neutron's pooled ports then (one listing, off the loop)."""
    return time.monotonic(), await asyncio.to_thread(pool_port_ids, datapath)


def made_per_second(before: tuple[float, set[str]], after: tuple[float, set[str]]) -> str:
    made, took = len(after[1] - before[1]), after[0] - before[0]
    return f"{made} ports in {took:.1f} s: {made / took:.1f}/s" if took > 0 else "-"


async def stream_then_burst(
    kube: KubeClient, runtime: Runtime, args: argparse.Namespace, raw: list[float], neutron_rate: float
) -> list[Row]:
    """The phase's rows; ``neutron_rate``: the raw baseline's ports a second (one bulk request, Neutron idle)."""
    runtime.retries = False
    datapath = runtime.datapath
    stream = [f"w{i:03d}" for i in range(args.pods)]
    burst = [f"v{i:03d}" for i in range(args.pods)]
    path = f"/api/v1/namespaces/{runtime.namespace}/pods"
    async with watch_from_now(kube, path, runtime.pod), await with_server(runtime, kube):
        rested = await at_rest(datapath)  # the pause is before the stream, never between its parts
        start = await counted(datapath)
        await create_pods(kube, runtime, stream, args.slo_rate)
        boundary = asyncio.create_task(counted(datapath))  # listed while the burst is being created
        await create_pods(kube, runtime, burst, args.burst_rate)
        await runtime.settle(stream + burst)
        end = await counted(datapath)
    parts = ((stream, start, await boundary), (burst, await boundary, end))
    times = [runtime.latencies(names) for names in (stream, burst)]
    first = sum(1 for name in stream + burst if runtime.first_try.get(name) == 1)
    answered = sum(1 for name in stream + burst if runtime.answered.get(name))
    met = (
        first == len(stream + burst)
        and answered == first
        and len(times[1]) == len(burst)
        and percentile(times[0], 0.99) <= STREAM_P99 * MS  # percentile(): milliseconds
        and percentile(times[1], 0.99) <= BURST_P99 * MS
    )
    rows: list[Row] = []
    for (names, before, after), part in zip(parts, ("stream", "burst"), strict=True):
        rate = args.slo_rate if part == "stream" else args.burst_rate
        what = f"{part}: {len(names)} pods at {rate:g}/s" + (
            f" ({rested:.0f} s at rest before)" if part == "stream" else ", right after"
        )
        rows += [
            timed_row(what, runtime.latencies(names), raw),
            ("  " + outcome(runtime, names), "", "", ""),
            split(runtime, names),
            (f"  the pools made {made_per_second(before, after)}", f"raw: {neutron_rate:.1f}/s", "", ""),
        ]
    verdict = "met" if met else "MISSED"
    targets = f"stream p99 ≤ {STREAM_P99:g} s, burst p99 ≤ {BURST_P99:g} s, every ADD first call, every TCP try"
    return [*rows, (f"  targets ({targets}): {verdict}", "", "", "")]
