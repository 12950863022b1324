"""The request guards' rules (web/guards.py) as plain data: method + headers → refused or not."""

from __future__ import annotations

import pytest

from kuberaven.web.guards import MAX_BODY_BYTES, HostRule, refusal

LOOPBACK = HostRule.for_listener("127.0.0.1:8080", token=None, allowed=["devbox.lan"])
OPEN = HostRule.for_listener("0.0.0.0:8080", token="s3cret")
JSON = {"host": "127.0.0.1:8080", "content-type": "application/json", "content-length": "2"}

CASES = [
    # (hosts_rule, method, headers, status or None)
    (LOOPBACK, "GET", {"host": "127.0.0.1:8080"}, None),
    (LOOPBACK, "GET", {"host": "localhost:8080"}, None),
    (LOOPBACK, "GET", {"host": "DevBox.lan:8080"}, None),  # an allowed name, any case
    (LOOPBACK, "GET", {"host": "[::1]:9999"}, None),  # the name counts, not the port
    (LOOPBACK, "GET", {"host": "evil.example:8080"}, 403),  # DNS rebinding: a page's own name
    (LOOPBACK, "GET", {}, 403),  # no Host at all
    (OPEN, "GET", {"host": "kuberaven.svc:8080"}, None),  # behind a token any name serves
    (LOOPBACK, "POST", JSON, None),
    (LOOPBACK, "POST", {**JSON, "content-type": "application/yaml; charset=utf-8"}, None),
    (LOOPBACK, "POST", {**JSON, "content-type": "text/plain"}, 415),  # a cross-site form or fetch without preflight
    (LOOPBACK, "POST", {**JSON, "content-type": "application/x-www-form-urlencoded"}, 415),
    (LOOPBACK, "POST", {"host": "127.0.0.1:8080", "transfer-encoding": "chunked"}, 415),  # a body, no type
    (LOOPBACK, "DELETE", {"host": "127.0.0.1:8080"}, None),  # no body: nothing to type (and DELETE is preflighted)
    (LOOPBACK, "POST", {**JSON, "origin": "http://127.0.0.1:8080"}, None),  # the page itself
    (LOOPBACK, "POST", {**JSON, "origin": "http://evil.example"}, 403),
    (LOOPBACK, "POST", {**JSON, "origin": "null"}, 403),
    (OPEN, "PATCH", {**JSON, "host": "kuberaven.svc:8080", "origin": "https://evil.example"}, 403),
    (LOOPBACK, "POST", {**JSON, "content-length": str(MAX_BODY_BYTES + 1)}, 413),
    (LOOPBACK, "POST", {**JSON, "content-length": "²"}, None),  # not a number: the body is counted as it comes
]


def case_id(value: object) -> str:
    """Stable across processes (a frozenset's order is not: pytest-xdist's workers must collect the same ids)."""
    if value is LOOPBACK or value is OPEN:
        return "loopback" if value is LOOPBACK else "open"
    return str(value)[:50]


@pytest.mark.parametrize(("hosts_rule", "method", "headers", "status"), CASES, ids=case_id)
def test_requests_are_refused_by_the_rules(
    hosts_rule: HostRule, method: str, headers: dict[str, str], status: int
) -> None:
    refused = refusal(method, headers, hosts_rule)
    assert (refused.status if refused else None) == status, refused


def test_a_refusal_names_the_problem() -> None:
    refused = refusal("POST", {**JSON, "content-type": "text/plain"}, LOOPBACK)
    assert refused is not None and "text/plain" in refused.detail and "application/json" in refused.detail
