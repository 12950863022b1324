"""Pod events as CloudEvents (events/cloudevents.py): each mode read back by the CloudEvents SDK's Kafka
conversion, a client nobody here wrote."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cloudevents import kafka as ce_kafka

from kuberaven.events import cloudevents
from kuberaven.events.cloudevents import ContentMode
from kuberaven.events.schema import STATUSES, pod_event

OBSERVED = {"uid": "u-1", "labels": {"app": "web"}, "pod_ips": ["10.1.0.7"], "phase": "Running", "node": "n1",
            "resource_version": "42"}  # fmt: skip


def read(mode: ContentMode, value: bytes, headers: list[tuple[str, str | bytes | None]]) -> Any:
    message = ce_kafka.KafkaMessage({k: v for k, v in headers if isinstance(v, bytes)}, b"shop/web-1", value)
    return (ce_kafka.from_structured if mode is ContentMode.STRUCTURED else ce_kafka.from_binary)(message)


@pytest.mark.parametrize("mode", list(ContentMode))
@pytest.mark.parametrize("status", STATUSES)
def test_every_status_reads_back_as_a_cloudevent_with_the_events_own_attributes(mode: ContentMode, status: str) -> None:
    event = pod_event(status, cluster="east", namespace="shop", name="web-1", observed=OBSERVED)
    value, headers = cloudevents.message(event, mode)
    found = read(mode, value, headers)
    assert found["specversion"] == "1.0"
    assert found["id"] == event["event_id"]
    assert found["type"] == f"io.kuberaven.pod.{status}"
    assert found["source"] == "urn:kuberaven:cluster:east"
    assert found["subject"] == "shop/web-1" and found["time"] == event["time"]
    assert found.get_data() == event


def test_binary_mode_keeps_the_xos_event_as_the_value_for_consumers_that_read_only_the_value() -> None:
    event = pod_event("created", cluster="east", namespace="shop", name="web-1", observed=OBSERVED)
    value, headers = cloudevents.message(event)
    assert json.loads(value) == event
    assert ("content-type", b"application/json") in headers
    assert {name for name, _ in headers} >= {"ce_specversion", "ce_id", "ce_source", "ce_type", "ce_time",
                                             "ce_subject"}  # fmt: skip


def test_the_xos_format_is_the_original_message() -> None:
    event = pod_event("deleted", cluster="east", namespace="shop", name="web-1", observed=OBSERVED)
    value, headers = cloudevents.xos_message(event)
    assert json.loads(value) == event
    assert headers == [("event_id", event["event_id"].encode()), ("event_type", b"deleted")]
