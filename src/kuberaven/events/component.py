"""The Kafka relay as a component of the daemon (events/, run by runtime/supervisor.py).

    Supervisor ──► RelayComponent.run() ──► OutboxRelay.run() in its own thread (confluent-kafka blocks)
    /readyz    ◄── ready(): the broker has not been unreachable for longer than ``kafka_unreachable_after``
               ◄── status(): unsent events in the outbox, whether the broker answers, the last error

While the broker is down the inventory keeps writing events to the outbox;
nothing is lost, they go out when it is back. /readyz turns 503 only after
``kafka_unreachable_after`` seconds, so that a broker restart does not flap it.
"""

from __future__ import annotations

import asyncio

from ..component_status import ComponentStatus
from .relay import OutboxRelay


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
