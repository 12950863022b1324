"""A batch's event ids and time (events/schema.py): random UUIDs drawn at once, one time for the batch."""

from __future__ import annotations

import re
import uuid

from kuberaven.events.schema import event_ids, event_time, pod_event

OBSERVED = {"uid": "u1", "pod_ips": ["10.0.0.1"], "labels": {"a": "b"}}


def test_event_ids_are_distinct_random_uuids() -> None:
    ids = event_ids(500)
    assert len(set(ids)) == 500
    for value in ids:
        parsed = uuid.UUID(value)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, value)
    assert event_ids(0) == []
    assert set(event_ids(3)).isdisjoint(ids)


def test_a_pod_event_takes_the_batchs_id_and_time_or_makes_its_own() -> None:
    given = pod_event("created", cluster="c", namespace="n", name="p", observed=OBSERVED, event_id="id-1", time="t")
    assert (given["event_id"], given["time"]) == ("id-1", "t")
    made = pod_event("created", cluster="c", namespace="n", name="p", observed=OBSERVED)
    assert uuid.UUID(made["event_id"]).version == 4
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", made["time"]), made["time"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", event_time())
