"""The relay's options (events/): read by events/relay.py, composed into the settings by settings.py.

Apart from relay.py so that reading the settings does not load confluent-kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Gt

from .cloudevents import ContentMode, EventFormat
from .schema import EventKey


@dataclass(frozen=True)
class RelayOptions:
    """The events' way to Kafka; the fields before ``batch`` are settings of the same names."""

    kafka: str | None = None  # the broker's bootstrap HOST:PORT; None: no relay, the outbox is the event log
    topic: str = "xos.kubernetes.pod-details"  # the original consumers' name
    kafka_partitions: Annotated[int, Ge(1)] = 3  # of a topic the relay creates
    kafka_replication_factor: Annotated[int, Ge(1)] | None = None  # None: min(3, brokers)
    event_key: EventKey = EventKey.NAMESPACED
    # How events are written to Kafka: "xos" (the original JSON) or "cloudevents" (the CloudEvents Kafka
    # binding), in binary mode (ce_* headers, the JSON as the value) or structured (one JSON envelope).
    event_format: EventFormat = EventFormat.XOS
    event_cloudevents_mode: ContentMode = ContentMode.BINARY
    outbox_retention: float = 7 * 24 * 3600.0  # seconds a sent event stays readable in the event log
    # Seconds the broker may be unreachable before /readyz says not ready (events wait in the outbox).
    kafka_unreachable_after: Annotated[float, Gt(0)] = 30.0
    batch: int = 1000
    max_in_flight: int = 20000
    idle_poll: float = 1.0  # how often to look for rows nobody woke us for (other processes' writes)
