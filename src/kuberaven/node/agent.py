"""`kuberaven node`: the node agent behind kuberaven-cni (node/, one asyncio loop per node).

    API server ──list+watch pods, spec.nodeName=<node>──► InformerFactory (watch/) ──► NodePods (pods.py)
                                                                                          │ VIFs, wake-ups
    kuberaven-cni ──unix socket──► Server (server.py) ──► Calls (calls.py) ◄──────────────┘
                                                           │ links.py in the agent's threads (OffLoop):
                                                           │ pods in parallel
                                                           └► readiness.py: ovn-installed | port-active

The watch and the sweep are loops on kube/loops.py, the base the daemon's
loops stand on: the watch is started again after each failure with
kube/backoff.py's Backoff (RESTART_INITIAL doubling to RESTART_MAX, with
jitter; a watch that ran that long starts from the first delay again).
A gone pod's pair is parked, still bound, for the next pod of its port
(cni/handover.py); a sweep every SWEEP_INTERVAL unwires those parked past
``park_for``, a failed sweep logged and the next one tried. It keeps no
state of its own: a restart lists its node's pods again and finds every
attachment by name or in the node's Open vSwitch (an agent restart leaves
wired pods wired; an ADD cut by it is retried by the runtime and answered as
the first would have been). SIGTERM closes the socket, lets calls in flight
finish for ``stop_timeout`` seconds and stops the watch and the sweep.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

from ..cni.links import DEFAULT_OVS_BRIDGE, DEFAULT_PARK_FOR, Node
from ..cni.protocol import DEFAULT_SOCKET
from ..kube.backoff import Backoff
from ..kube.client import KubeClient
from ..kube.loops import Loops, OffLoop
from ..watch.informers import InformerFactory, Joined
from ..watch.watcher import WatchTarget
from .calls import Calls
from .pods import FIELDS, NodePods
from .readiness import Readiness
from .server import Server

log = logging.getLogger(__name__)
CONSUMER = "node-agent"
# Seconds before the watch is started again after a failure: the first delay, doubling up to the longest.
RESTART_INITIAL, RESTART_MAX = 1.0, 30.0
WIRING_THREADS = "wire"  # the prefix of the names of the threads that run ip and ovs-vsctl
SWEEP_INTERVAL = 10.0  # seconds between two looks for pairs parked past park_for


@dataclass(frozen=True)
class NodeOptions:
    """The agent's settings: `kuberaven node`'s flags."""

    node: str  # the Kubernetes node it serves (NODE_NAME from the downward API)
    socket: Path = Path(DEFAULT_SOCKET)
    readiness: Readiness = Readiness.AUTO
    kubeconfig: str | None = None  # None: KUBECONFIG, ~/.kube/config or in-cluster
    ovsdb: str | None = None  # the node's Open_vSwitch database; None: ovs-vsctl's own
    ovs_bridge: str = DEFAULT_OVS_BRIDGE
    node_netns: str | None = None  # the netns of host ends, bridges and OVS; None: the agent's own
    workers: int = 16  # threads running ip / ovs-vsctl: pods wired at once
    park_for: float = DEFAULT_PARK_FOR  # seconds a gone pod's pair waits for its port's next pod; 0: never
    stop_timeout: float = 10.0  # seconds calls in flight get on SIGTERM

    def __post_init__(self) -> None:
        if not self.node:
            raise ValueError("the node's name is required (--node or NODE_NAME)")
        if self.workers < 1 or self.stop_timeout < 0 or self.park_for < 0:
            raise ValueError("workers must be at least 1, stop_timeout and park_for not negative")


class NodeAgent:
    def __init__(self, options: NodeOptions, client: KubeClient) -> None:
        self.options, self.client = options, client
        self.pods = NodePods()
        self.factory = InformerFactory(client, cluster=f"node {options.node}")
        target = WatchTarget("v1", "Pod", field_selector=f"spec.nodeName={options.node}")
        self.informer = self.factory.informer(target)
        self.informer.declare(CONSUMER, self.pods, FIELDS)
        self.informer.join(CONSUMER, Joined(needs_list=True))
        self.threads = OffLoop(options.workers, WIRING_THREADS)
        node = Node(
            netns=options.node_netns, ovsdb=options.ovsdb, ovs_bridge=options.ovs_bridge, park_for=options.park_for
        )
        self.calls = Calls(self.pods, node, options.readiness, self.threads, lambda: not self.informer.stale())
        self.server = Server(options.socket, self.calls.answer)
        self._loops = Loops()

    async def run(self) -> None:
        """Serve until stop(): the socket at once (STATUS says 50 until the watch has synced), the watch."""
        await self.server.start()
        watch = f"watch of node {self.options.node}'s pods"
        restarts = Backoff(RESTART_INITIAL, RESTART_MAX)
        # A watch's failure is the API server's or the network's: one line each, not a traceback.
        self._loops.start(self._loops.until_stopped(self.factory.run, watch, restarts, quiet=(Exception,)), "node pods")
        sweep = self._loops.every(SWEEP_INTERVAL, self.calls.sweep, "sweep of parked pairs", first=SWEEP_INTERVAL)
        self._loops.start(sweep, "sweep")
        try:
            await self._loops.wait()
        finally:
            log.info("stopping")
            await self.server.close(self.options.stop_timeout)  # the calls in flight still see the watch
            self.factory.stop()
            await self._loops.join(grace=0)  # neither the watch nor a sweep needs to finish: cancelled at once
            self.threads.close(wait=True)

    def stop(self) -> None:
        self._loops.stop()


class KubeconfigError(RuntimeError):
    """The agent has no way to the API server; the message says which kubeconfig failed and why."""


async def run_agent(options: NodeOptions) -> None:
    """`kuberaven node`: the agent until SIGTERM or SIGINT."""
    try:
        client = KubeClient.from_kubeconfig(options.kubeconfig)
    except Exception as error:  # lightkube's ConfigError, an unreadable file, a malformed one
        where = options.kubeconfig or "the usual places and in-cluster"
        raise KubeconfigError(f"cannot load a kubeconfig from {where}: {error}") from None
    try:
        agent = NodeAgent(options, client)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, agent.stop)
        log.info("node agent for %s (readiness %s)", options.node, options.readiness)
        await agent.run()
    finally:
        await client.close()
