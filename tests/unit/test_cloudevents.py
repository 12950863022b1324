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
