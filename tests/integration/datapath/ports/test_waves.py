"""A steady stream of pods and then a burst, with no pause between them, on real packets: no ADD gives up.

Against the package's data path (conftest.py here: pools of 5 to 15 ports). The test plays a runtime that calls
ADD once per pod, the moment the pod is created, and never retries it: a pod whose pool the stream emptied waits
for its port inside that one ADD (the agent's annotationTimeout, sized to a kubelet's deadline), while the pool's
refill sends the waiting pods' ports first. Smaller than bench/ovn_vif_bench.py's wave (60 at 2/s, then 60 at
20/s): the stream drains a pool of 5, and the burst outgrows its maximum of 15.
"""

from __future__ import annotations

import asyncio

import pytest

from kuberaven.kube.client import KubeClient
from tests.datapath import PORTS_GROUP, Pod, Sandboxes, connect, create_pod, serving

pytestmark = [pytest.mark.xdist_group(PORTS_GROUP), pytest.mark.timeout(600)]

PORT = 8080
STREAM, STREAM_RATE = 6, 2.0  # pods, and pods a second
BURST = 16  # pods created at once, right after the stream's last


async def test_a_burst_right_after_a_stream_is_wired_at_the_first_add_of_every_pod(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    server = await boxes.pod(dp_namespace, "server")

    async def one(name: str) -> tuple[Pod, int, str | None]:
        await create_pod(dp_kube, boxes.datapath, dp_namespace, name)
        pod, calls = await boxes.wire(dp_namespace, name)  # the first answer counts: it must be the result
        return pod, calls, await connect(pod.sandbox, server.ip, PORT)

    async with serving(server.sandbox, PORT, "server"):
        wiring = []
        for index in range(STREAM):
            wiring.append(asyncio.create_task(one(f"s{index:02d}")))
            await asyncio.sleep(1 / STREAM_RATE)
        wiring += [asyncio.create_task(one(f"b{index:02d}")) for index in range(BURST)]
        wired = await asyncio.gather(*wiring)
    assert [calls for _, calls, _ in wired] == [1] * (STREAM + BURST), "every ADD succeeded on its first call"
    assert [answer for _, _, answer in wired] == [f"server {pod.ip}" for pod, _, _ in wired]
    pods = [server, *(pod for pod, _, _ in wired)]
    assert len({p.ip for p in pods}) == len({p.vif.port for p in pods}) == len(pods), "no two pods share a port"
