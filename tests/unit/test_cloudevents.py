"""Pod events as CloudEvents (events/cloudevents.py): each mode read back by the CloudEvents SDK's Kafka
binding, a client nobody here wrote."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.bindings import kafka as ce_kafka

from kuberaven.events import cloudevents
from kuberaven.events.cloudevents import ContentMode, Headers
from kuberaven.events.schema import STATUSES, pod_event

OBSERVED = {
    "uid": "u-1",
    "labels": {"app": "web"},
    "pod_ips": ["10.1.0.7"],
    "phase": "Running",
    "node": "n1",
    "resource_version": "42",
}


def read(value: bytes, headers: Headers) -> BaseCloudEvent:
    """As a consumer would: the SDK tells binary from structured mode by the message itself."""
    kafka_headers = {name: raw for name, raw in headers if isinstance(raw, bytes)}
    return ce_kafka.from_kafka_event(ce_kafka.KafkaMessage(kafka_headers, b"shop/web-1", value))


@pytest.mark.parametrize("mode", list(ContentMode))
@pytest.mark.parametrize("status", STATUSES)
def test_every_status_reads_back_as_a_cloudevent_with_the_events_own_attributes(mode: ContentMode, status: str) -> None:
    event = pod_event(status, cluster="east", namespace="shop", name="web-1", observed=OBSERVED)
    found = read(*cloudevents.message(event, mode))
    assert found.get_specversion() == "1.0"
    assert found.get_id() == event["event_id"]
    assert found.get_type() == f"io.kuberaven.pod.{status}"
    assert found.get_source() == "urn:kuberaven:cluster:east"
    assert found.get_subject() == "shop/web-1"
    assert found.get_time() == dt.datetime.fromisoformat(event["time"])
    assert found.get_datacontenttype() == "application/json"
    assert found.get_data() == event


def test_binary_mode_keeps_the_xos_event_as_the_value_for_consumers_that_read_only_the_value() -> None:
    event = pod_event("created", cluster="east", namespace="shop", name="web-1", observed=OBSERVED)
    value, headers = cloudevents.message(event)
    assert json.loads(value) == event
    assert ("content-type", b"application/json") in headers
    assert {name for name, _ in headers} >= {"ce_specversion", "ce_id", "ce_source", "ce_type", "ce_time", "ce_subject"}


def test_structured_mode_names_the_format_in_the_header_and_the_datas_type_in_the_envelope() -> None:
    event = pod_event("updated", cluster="east", namespace="shop", name="web-1", observed=OBSERVED)
    value, headers = cloudevents.message(event, ContentMode.STRUCTURED)
    assert headers == [("content-type", b"application/cloudevents+json")]
    envelope = json.loads(value)
    assert envelope["datacontenttype"] == "application/json" and envelope["data"] == event


def test_the_xos_format_is_the_original_message() -> None:
    event = pod_event("deleted", cluster="east", namespace="shop", name="web-1", observed=OBSERVED)
    value, headers = cloudevents.xos_message(event, event["event_id"], event["status"])
    assert json.loads(value) == event
    assert headers == [("event_id", event["event_id"].encode()), ("event_type", b"deleted")]


def test_binary_mode_from_the_rows_columns_passes_the_stored_json_through() -> None:
    """What the relay sends: the payload's stored text as the value, the attributes from the outbox row."""
    event = pod_event("created", cluster="east", namespace="shop", name="web-1", observed=OBSERVED)
    stored = json.dumps(event)  # as another writer may have stored it (spaces and all): sent as it is
    context = cloudevents.row_attributes(event["event_id"], "east", "created", event["time"], "shop/web-1")
    value, headers = cloudevents.binary_message(stored, context)
    assert value == stored.encode()
    found = read(value, headers)
    assert (found.get_id(), found.get_subject(), found.get_data()) == (event["event_id"], "shop/web-1", event)
    assert context == cloudevents.attributes(event), "the row's columns say what the event says"


@pytest.mark.parametrize(
    ("cluster", "time", "expected"),
    [
        ("east", "2026-01-02T03:04:05Z", {"source": "urn:kuberaven:cluster:east", "time": "2026-01-02T03:04:05Z"}),
        (None, "2026-01-02T03:04:05Z", {"source": "urn:kuberaven:cluster:default", "time": "2026-01-02T03:04:05Z"}),
        ("", None, {"source": "urn:kuberaven:cluster:default"}),  # no time in the event: the optional one left out
    ],
)
def test_row_attributes(cluster: str | None, time: str | None, expected: dict[str, str]) -> None:
    found = cloudevents.row_attributes("id-1", cluster, "deleted", time, "ns/p")
    base = {"specversion": "1.0", "id": "id-1", "type": "io.kuberaven.pod.deleted", "subject": "ns/p"}
    assert found == base | expected


def test_the_xos_format_passes_stored_json_text_through() -> None:
    value, headers = cloudevents.xos_message('{"event_id": "e-1", "status": "created"}', "e-1", "created")
    assert value == b'{"event_id": "e-1", "status": "created"}'
    assert headers == [("event_id", b"e-1"), ("event_type", b"created")]
