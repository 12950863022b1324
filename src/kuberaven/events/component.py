"""The Kafka relay as a component of the daemon (events/, run by runtime/supervisor.py).

    Supervisor ──► RelayComponent.run() ──► OutboxRelay.run() in its own thread (confluent-kafka blocks)
    a cluster's components ──► ClusterPublishing (per-cluster publishing: while this replica owns the cluster)
    /readyz    ◄── ready(): the broker has not been unreachable for longer than ``kafka_unreachable_after``
               ◄── status(): unsent events in the outbox, whether the broker answers, the last error

While the broker is down the inventory keeps writing events to the outbox;
nothing is lost, they go out when it is back. /readyz turns 503 only after
``kafka_unreachable_after`` seconds, so that a broker restart does not flap it.

With leader election on PostgreSQL each owned cluster's components include a
ClusterPublishing: it hands the cluster to this replica's relay when they
start, and on stop waits (up to LEAVE_WAIT) for the relay to let the
cluster's publisher lock go, so that the cluster's Lease is released after
its events stopped going out from here (runtime/clusters.py releases the
Lease once the components have stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..component_status import ComponentStatus
from .relay import OutboxRelay
from .scope import OwnedClusters

log = logging.getLogger(__name__)
# Seconds a cluster's stop waits for the relay to let its lock go (deliveries in flight acknowledged). Past
# that the stop goes on and the Lease is released; the lock stays until the deliveries settle (the next
# owner's relay waits for it), or goes with this process.
LEAVE_WAIT = 20.0


class RelayComponent:
    name = "relay"
    stop_last = True  # stopped after the loops that write events

    def __init__(self, relay: OutboxRelay) -> None:
        self.relay = relay
        self.unreachable_after = relay.options.kafka_unreachable_after

    async def run(self) -> None:
        await asyncio.to_thread(self.relay.run)

    def stop(self) -> None:
        self.relay.stop()

    def wake(self, *_: object) -> None:
        """New rows in the outbox (the inventory's on_commit)."""
        self.relay.wake()

    def for_cluster(self, cluster: str) -> ClusterPublishing | None:
        """The component that publishes one owned cluster's events (None: this relay publishes every cluster)."""
        scope = self.relay.scope
        return ClusterPublishing(self.relay, scope, cluster) if isinstance(scope, OwnedClusters) else None

    def ready(self) -> bool:
        return self.relay.unreachable_for() <= self.unreachable_after

    def status(self) -> list[ComponentStatus]:
        unreachable = self.relay.unreachable_for()
        return [
            ComponentStatus(
                component=self.name,
                target=f"kafka {self.relay.bootstrap} topic {self.relay.options.topic}",
                publishing=self.relay.publishing,  # false: a standby, another replica publishes
                broker_reachable=unreachable == 0,
                unreachable_seconds=round(unreachable, 1),
                pending=self.relay.pending,
                last_error=self.relay.last_error,
            )
        ]


class ClusterPublishing:
    """While this replica owns a cluster, its relay publishes that cluster's outbox rows."""

    name = "publishing"
    stop_last = True  # after the inventory: its last batch goes out from here when it can

    def __init__(self, relay: OutboxRelay, scope: OwnedClusters, cluster: str, leave_wait: float = LEAVE_WAIT) -> None:
        self.relay = relay
        self.scope = scope
        self.cluster = cluster
        self.leave_wait = leave_wait
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        self.scope.own(self.cluster)
        self.relay.wake()
        try:
            await self._stopping.wait()
        finally:
            await self._leave()

    async def _leave(self) -> None:
        """Hand the cluster back to the relay; wait (no worker thread held: many may stop at once) until let go."""
        loop, left = asyncio.get_running_loop(), asyncio.Event()
        self.scope.disown(self.cluster, notify=lambda: loop.call_soon_threadsafe(left.set))
        self.relay.wake()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(left.wait(), self.leave_wait)
        if not left.is_set():
            log.warning(
                "cluster %s: its events still in flight after %.0fs; its publisher lock goes when they settle",
                self.cluster,
                self.leave_wait,
            )

    def stop(self) -> None:
        self._stopping.set()

    def ready(self) -> bool:
        return True

    def status(self) -> list[ComponentStatus]:
        return []
