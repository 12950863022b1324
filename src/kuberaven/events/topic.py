"""The event topic on the broker (events/, under relay.py): found, or made with its partitions and replicas.

    OutboxRelay ──► topic_metadata() (is it there? the broker answered)
                └─► create_topic() when it is missing: at the start, and again when deliveries stall on a
                    broker that restarted without storage and lost it

A topic is made with ``kafka_partitions`` partitions and
``kafka_replication_factor`` replicas (default: min(3, brokers), so that a
broker's loss loses nothing). Another relay making it at the same moment is
not an error.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic, TopicMetadata

from .options import RelayOptions

log = logging.getLogger(__name__)
METADATA_TIMEOUT = 5.0  # seconds a metadata request may take
CREATE_TIMEOUT = 15.0  # seconds the broker may take to make the topic


def topic_metadata(producer: Producer, topic: str) -> TopicMetadata | None:
    """The topic as the broker knows it, None when it has none (a broker that does not answer raises)."""
    # Ask for all topics: a metadata request naming the topic makes a broker
    # with auto.create.topics.enable create it with its default partitions.
    return producer.list_topics(timeout=METADATA_TIMEOUT).topics.get(topic)


def create_topic(producer: Producer, bootstrap: str, options: RelayOptions) -> None:
    """Make the topic ``options`` name (one that exists meanwhile is left as it is)."""
    brokers = len(producer.list_topics(timeout=METADATA_TIMEOUT).brokers)
    replicas = replication_factor(options.kafka_replication_factor, brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(options.topic, options.kafka_partitions, replicas)], request_timeout=10)
    try:
        futures[options.topic].result(CREATE_TIMEOUT)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
        return
    log.info(
        "event relay: created topic %s with %d partitions and replication factor %d (%d brokers)",
        options.topic,
        options.kafka_partitions,
        replicas,
        brokers,
    )


def replication_factor(configured: int | None, brokers: int) -> int:
    """Replicas of a topic kuberaven creates: as configured, else min(3, brokers) so one broker's loss loses nothing."""
    return configured if configured is not None else max(1, min(3, brokers))
