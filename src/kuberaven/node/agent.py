"""`kuberaven node`: the node agent behind kuberaven-cni (node/, one asyncio loop per node).

    API server ──list+watch pods, spec.nodeName=<node>──► InformerFactory (watch/) ──► AgentPods (pods.py)
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

from ..cni.links import Node
from ..kube.backoff import Backoff
from ..kube.client import KubeClient
from ..kube.loops import Loops, OffLoop
from ..watch.informers import InformerFactory, Joined
from ..watch.watcher import WatchTarget
from .calls import Calls
from .options import NodeOptions
from .pods import FIELDS, AgentPods
from .server import Server

log = logging.getLogger(__name__)
CONSUMER = "node-agent"
# Seconds before the watch is started again after a failure: the first delay, doubling up to the longest.
RESTART_INITIAL, RESTART_MAX = 1.0, 30.0
WIRING_THREADS = "wire"  # the prefix of the names of the threads that run ip and ovs-vsctl
SWEEP_INTERVAL = 10.0  # seconds between two looks for pairs parked past park_for


class NodeAgent:
    def __init__(self, options: NodeOptions, client: KubeClient) -> None:
        self.options, self.client = options, client
        self.pods = AgentPods()
        self.factory = InformerFactory(client, cluster=f"node {options.name}")
        target = WatchTarget("v1", "Pod", field_selector=f"spec.nodeName={options.name}")
        self.informer = self.factory.informer(target)
        self.informer.declare(CONSUMER, self.pods, FIELDS)
        self.informer.join(CONSUMER, Joined(needs_list=True))
        self.threads = OffLoop(options.workers, WIRING_THREADS)
        node = Node(netns=options.netns, ovsdb=options.ovsdb, ovs_bridge=options.ovs_bridge, park_for=options.park_for)
        self.calls = Calls(self.pods, node, options.readiness, self.threads, lambda: not self.informer.stale())
        self.server = Server(options.socket.absolute(), self.calls.answer)
        self._loops = Loops()

    async def run(self) -> None:
        """Serve until stop(): the socket at once (STATUS says 50 until the watch has synced), the watch."""
        await self.server.start()
        watch = f"watch of node {self.options.name}'s pods"
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


async def run_agent(options: NodeOptions, kubeconfig: str | None) -> None:
    """`kuberaven node`: the agent until SIGTERM or SIGINT; ``kubeconfig`` None: the usual places, in-cluster."""
    try:
        client = KubeClient.from_kubeconfig(kubeconfig)
    except Exception as error:  # lightkube's ConfigError, an unreadable file, a malformed one
        where = kubeconfig or "the usual places and in-cluster"
        raise KubeconfigError(f"cannot load a kubeconfig from {where}: {error}") from None
    try:
        agent = NodeAgent(options, client)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, agent.stop)
        log.info("node agent for %s (readiness %s)", options.name, options.readiness)
        await agent.run()
    finally:
        await client.close()
