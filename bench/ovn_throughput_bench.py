"""Pod-to-pod TCP throughput through OVN, beside a bare veth pair, in the same run (no target: reported).

Runs `kuberaven testenv up --openstack` and `kuberaven run` on it (as
bench/ovn_vif_bench.py does) and wires two pods of one namespace with
kuberaven-cni into network namespaces of the bench's own: each pod's veth is
a port of br-int on Open vSwitch's userspace datapath (``netdev``, no DPDK:
ovs-vswitchd reads and writes the veths through sockets, in its own threads,
with ``userspace-tso-enable``), and OVN's flows (port security, the
namespace's security group, the logical switch) are applied to every packet.
Baseline: two namespaces joined by a plain veth pair (the kernel alone).

iperf3 (Debian package ``iperf3``) sends for ``--seconds`` from one
namespace to the other, ``--rounds`` times, the two paths taking turns; the
table has the median and the range of the receiver's rate. Every namespace
is deleted at the end, on failure too.

    python bench/ovn_throughput_bench.py [--seconds 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import statistics
import subprocess
import time
import uuid
from collections.abc import Iterator

from common import openstack_datapath, print_table
from kuberaven.kube.client import KubeClient
from kuberaven.testing.namespaces import create_namespace
from tests.datapath import delete_netns, sandboxes

NAMESPACE = "throughput"
PORT = 5201  # iperf3's
BARE = ("10.253.0.1", "10.253.0.2")  # the veth pair's two ends (inside its namespaces only)
Row = tuple[str, str, str, str]


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextlib.contextmanager
def veth_pair() -> Iterator[tuple[str, str]]:
    """Two network namespaces joined by a veth pair, BARE's addresses on its ends: (client, server) netns."""
    suffix = uuid.uuid4().hex[:6]
    client, server = f"krvbench-veth-{suffix}-a", f"krvbench-veth-{suffix}-b"
    try:
        for netns in (client, server):
            ip("netns", "add", netns)
        ip("link", "add", f"krvb{suffix}a", "netns", client, "type", "veth", "peer", f"krvb{suffix}b", "netns", server)
        for netns, end, address in ((client, "a", BARE[0]), (server, "b", BARE[1])):
            ip("-n", netns, "addr", "add", f"{address}/30", "dev", f"krvb{suffix}{end}")
            ip("-n", netns, "link", "set", f"krvb{suffix}{end}", "up")
            ip("-n", netns, "link", "set", "lo", "up")
        yield client, server
    finally:
        delete_netns([client, server])


def iperf3(client: str, server: str, address: str, seconds: float) -> float:
    """TCP from netns ``client`` to an iperf3 server in netns ``server`` at ``address``: the receiver's bit/s."""
    listening = subprocess.Popen(
        ["ip", "netns", "exec", server, "iperf3", "--server", "--one-off", "--port", str(PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(50):  # until the server listens
            sent = subprocess.run(
                ["ip", "netns", "exec", client, "iperf3", "-c", address, "-p", str(PORT), "-t", str(seconds), "-J"],
                capture_output=True,
                text=True,
                check=False,
            )
            answer = json.loads(sent.stdout)
            if "error" not in answer:
                return float(answer["end"]["sum_received"]["bits_per_second"])
            if "connect" not in answer["error"]:
                raise RuntimeError(f"iperf3: {answer['error']}")
            time.sleep(0.2)
        raise RuntimeError(f"iperf3: no server at {address}:{PORT} in netns {server}")
    finally:
        listening.kill()
        listening.wait()


def rate(values: list[float]) -> str:
    return f"{statistics.median(values) / 1e9:.2f} Gbit/s ({min(values) / 1e9:.2f}–{max(values) / 1e9:.2f})"


async def measure(args: argparse.Namespace) -> list[Row]:
    ovn: list[float] = []
    bare: list[float] = []
    with openstack_datapath() as datapath:
        kube = KubeClient.from_kubeconfig(datapath.env["kubeconfig"])
        try:
            await create_namespace(kube, NAMESPACE)
            async with sandboxes(datapath, kube) as boxes:
                sender = await boxes.pod(NAMESPACE, "sender")
                receiver = await boxes.pod(NAMESPACE, "receiver")
                with veth_pair() as (client, server):
                    for _ in range(args.rounds):
                        ovn.append(iperf3(sender.sandbox, receiver.sandbox, receiver.ip, args.seconds))
                        bare.append(iperf3(client, server, BARE[1], args.seconds))
                mtu = receiver.vif.mtu
        finally:
            await kube.close()
    return [
        (
            f"pod → pod TCP, one stream, {args.seconds:g} s × {args.rounds}",
            rate(ovn),
            rate(bare),
            f"{statistics.median(ovn) / statistics.median(bare):.3f}",
        ),
        ("MTU", f"{mtu} (the VIF's)", "1500", ""),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("iperf3") is None:
        raise SystemExit("iperf3 is not installed (Debian package iperf3: make deps)")
    print("OVN (kuberaven-cni on br-int, userspace datapath) vs a bare veth pair:")
    print_table(asyncio.run(measure(args)))
    print(json.dumps(vars(args)))


if __name__ == "__main__":
    main()
