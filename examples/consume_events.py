"""A service reacting to kuberaven's pod events from Kafka (the seed's ONOS/vOLT pattern).

Consumes the topic (default xos.kubernetes.pod-details), drops repeats
(delivery is at least once: dedupe on event_id), and prints one line per
event; for pods labelled ``xos_service=<--service>`` it says when the service
would re-push its state: when a pod is created (it has an IP) or restarted.

    python examples/consume_events.py --bootstrap localhost:9092 [--service onos] [--max-events N]
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid

from confluent_kafka import Consumer, KafkaException


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers, host:port")
    parser.add_argument("--topic", default="xos.kubernetes.pod-details")
    parser.add_argument("--group", default=f"example-{uuid.uuid4().hex[:8]}", help="consumer group id")
    parser.add_argument("--service", default="", help="react to pods with this xos_service label")
    parser.add_argument("--max-events", type=int, default=0, help="stop after this many events (0: never)")
    parser.add_argument("--timeout", type=float, default=0, help="stop after this many idle seconds (0: never)")
    args = parser.parse_args()

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest"})
    consumer.subscribe([args.topic])
    seen: set[str] = set()
    idle = 0.0
    try:
        while not args.max_events or len(seen) < args.max_events:
            message = consumer.poll(1.0)
            if message is None:
                idle += 1.0
                if args.timeout and idle >= args.timeout:
                    break
                continue
            if message.error():
                raise KafkaException(message.error())
            idle = 0.0
            event = json.loads(message.value())
            if event["event_id"] in seen:
                continue
            seen.add(event["event_id"])
            addresses = [a for i in event.get("netinterfaces", []) for a in i.get("addresses", [])]
            print(f"{event['status']:9} {event['namespace']}/{event['name']} {','.join(addresses)}", flush=True)
            service = (event.get("labels") or {}).get("xos_service", "")
            if args.service and service.lower() == args.service.lower() and event["status"] in ("created", "restarted"):
                print(f"  -> re-push {args.service} state to {event['name']}", flush=True)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
