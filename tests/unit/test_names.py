"""The rules for names and values users give (model/names.py), and the event key and topic replicas (events/)."""

from __future__ import annotations

import json

import pytest

from kuberaven.events.schema import EventKey, event_key, message_key
from kuberaven.events.topic import replication_factor
from kuberaven.model.names import (
    DNS_1035_LABEL,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    XOS_SERVICE_NAME_LIMIT,
    decode_string_map,
    dns_name_problem,
    plain_name_problem,
)


@pytest.mark.parametrize("name", ["SimpleExampleService", "mysite_demo1", "vOLT", "a.b", "x" * 30, "onos-2"])
def test_names_that_never_become_kubernetes_names_follow_the_original_rule(name: str) -> None:
    assert plain_name_problem(name, XOS_SERVICE_NAME_LIMIT) is None


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("", "is required"),
        (None, "is required"),
        ("x" * 31, "at most 30"),
        ("Simple Example", "U+0020 (SPACE)"),
        ("tab\there", "U+0009"),
        ("a/b", "'/'"),
        ("..", "is not a name"),
        (".", "is not a name"),
        ("evil\u202egnp.exe", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
        ("zero\u200bwidth", "U+200B"),
        ("<script>", "'<'"),
    ],
)
def test_names_that_cannot_be_referenced_or_read_as_they_are_are_refused(name: str | None, says: str) -> None:
    problem = plain_name_problem(name, XOS_SERVICE_NAME_LIMIT)
    assert problem is not None and says in problem


@pytest.mark.parametrize(
    ("name", "pattern", "limit", "valid"),
    [
        ("demo-trust", DNS_LABEL, 63, True),
        ("0day", DNS_LABEL, 63, True),
        ("Demo", DNS_LABEL, 63, False),
        ("a.b", DNS_LABEL, 63, False),
        ("x" * 64, DNS_LABEL, 63, False),
        ("front", DNS_1035_LABEL, 63, True),
        ("0front", DNS_1035_LABEL, 63, False),  # a Kubernetes Service name starts with a letter
        ("SimpleExampleService", DNS_1035_LABEL, 63, False),
        ("demo-pod.v2", DNS_SUBDOMAIN, 253, True),
        ("demo_pod", DNS_SUBDOMAIN, 253, False),
        ("a/b", DNS_SUBDOMAIN, 253, False),
        ("-a", DNS_SUBDOMAIN, 253, False),
    ],
)
def test_kubernetes_names_follow_the_rule_of_their_object(name: str, pattern: object, limit: int, valid: bool) -> None:
    problem = dns_name_problem(name, pattern, limit, "thing")  # type: ignore[arg-type]
    assert (problem is None) is valid, problem
    if not valid:
        assert f"{name!r} is not a valid thing (at most {limit} characters)" == problem


def test_data_is_a_mapping_or_its_json_encoding() -> None:
    assert decode_string_map({"a": "1"}) == ({"a": "1"}, None)
    assert decode_string_map(json.dumps({"a": "1"})) == ({"a": "1"}, None)
    assert decode_string_map(None) == (None, None)
    for bad, says in [
        ("not json", "not JSON-encoded"),
        ("[1, 2]", "is JSON of a list"),
        ("null", "is JSON of a NoneType"),
        (json.dumps({"a": 1}), "mapping of string keys to string values"),
        ({"a": 1}, "mapping of string keys to string values"),
        (42, "mapping of string keys to string values"),
    ]:
        value, problem = decode_string_map(bad)
        assert value is None and problem is not None and says in problem, (bad, problem)


def test_the_kafka_key_is_namespace_and_name_or_the_name_as_the_original() -> None:
    stored = event_key("shop", "web-0")
    assert message_key(stored, EventKey.NAMESPACED) == "shop/web-0"
    assert message_key(stored, EventKey.NAME) == "web-0"
    assert EventKey("name") is EventKey.NAME and EventKey("namespace/name") is EventKey.NAMESPACED


@pytest.mark.parametrize(("configured", "brokers", "replicas"), [(None, 1, 1), (None, 2, 2), (None, 5, 3), (2, 5, 2)])
def test_a_created_topic_is_replicated_on_up_to_three_brokers(
    configured: int | None, brokers: int, replicas: int
) -> None:
    assert replication_factor(configured, brokers) == replicas
