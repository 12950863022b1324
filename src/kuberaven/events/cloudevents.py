"""Pod events as CloudEvents on Kafka (events/, pure functions): what the relay sends with ``event_format=cloudevents``.

    outbox row (the XOS pod event: schema.py) ──► CloudEvents Kafka protocol binding, version 1.0
        binary mode (default):  headers ce_specversion, ce_id, ce_source, ce_type, ce_time, ce_subject and
                                content-type: application/json; value = the XOS event, as it is
        structured mode:        header content-type: application/cloudevents+json; value = one JSON object
                                with the attributes and the XOS event as ``data``
    The Kafka key is the pod's key in both, so one pod's events keep their order in one partition.

The attributes come from the event itself: ``id`` is its stable
``event_id`` (a re-send after a crash has the same id: consumers dedupe on
it), ``source`` names the cluster, ``type`` the status
(``io.kuberaven.pod.created``…), ``time`` its time, ``subject`` the pod's
``namespace/name``. The binding is a handful of headers, so it is written
here rather than built through the CloudEvents SDK's objects on the relay's
hot path; the tests read every message back with that SDK's Kafka binding.

The relay passes the stored payload through: an event's value is its JSON
text as the outbox holds it (``Payload`` may be that text or the decoded
event), and binary mode's headers come from the outbox row's columns
(row_attributes()), so only structured mode decodes the event to wrap it.
"""

from __future__ import annotations

import enum
import json
from typing import Any

SPEC_VERSION = "1.0"
TYPE_PREFIX = "io.kuberaven.pod."
SOURCE_PREFIX = "urn:kuberaven:cluster:"
JSON = "application/json"
STRUCTURED_JSON = "application/cloudevents+json"
CONTENT_TYPE = "content-type"

Headers = list[tuple[str, str | bytes | None]]  # as confluent-kafka takes them
Payload = dict[str, Any] | str  # an event, decoded or as its stored JSON text


class EventFormat(enum.StrEnum):
    """How pod events are written to Kafka."""

    XOS = "xos"  # the original JSON value, with event_id and event_type headers
    CLOUDEVENTS = "cloudevents"  # the CloudEvents Kafka binding (binary mode unless structured is asked for)


class ContentMode(enum.StrEnum):
    """The CloudEvents Kafka binding's two modes."""

    BINARY = "binary"
    STRUCTURED = "structured"


def attributes(event: dict[str, Any]) -> dict[str, str]:
    """The CloudEvents context attributes of one XOS pod event."""
    subject = f"{event['namespace']}/{event['name']}"
    return row_attributes(str(event["event_id"]), event.get("cluster"), event["status"], str(event["time"]), subject)


def row_attributes(event_id: str, cluster: str | None, status: str, time: str | None, key: str) -> dict[str, str]:
    """The context attributes from an outbox row's columns (``key``: ``namespace/name``) and the event's time
    (left out when the event has none: it is optional)."""
    found = {
        "specversion": SPEC_VERSION,
        "id": event_id,
        "source": f"{SOURCE_PREFIX}{cluster or 'default'}",
        "type": f"{TYPE_PREFIX}{status}",
        "time": time,
        "subject": key,
    }
    return {name: value for name, value in found.items() if value is not None}


def message(event: dict[str, Any], mode: ContentMode = ContentMode.BINARY) -> tuple[bytes, Headers]:
    """The Kafka value and headers of one pod event as a CloudEvent."""
    context = attributes(event)
    if mode is ContentMode.STRUCTURED:
        envelope = {**context, "datacontenttype": JSON, "data": event}
        return _json(envelope), [(CONTENT_TYPE, STRUCTURED_JSON.encode())]
    return binary_message(event, context)


def binary_message(payload: Payload, context: dict[str, str]) -> tuple[bytes, Headers]:
    """Binary mode: the event as the value, ``context`` (attributes(), row_attributes()) as ``ce_`` headers."""
    headers: Headers = [(f"ce_{name}", value.encode()) for name, value in context.items()]
    return _json(payload), [*headers, (CONTENT_TYPE, JSON.encode())]


def xos_message(payload: Payload, event_id: str, status: str) -> tuple[bytes, Headers]:
    """The original format: the event as the value, the outbox row's id and status as headers.

    The headers come from the row, not the payload: rows written by other code
    (or by older versions) need not repeat them inside the payload.
    """
    return _json(payload), [("event_id", event_id.encode()), ("event_type", status.encode())]


def _json(value: Payload) -> bytes:
    """The value's bytes: stored JSON text as it is, a decoded event encoded."""
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()
