"""The labels and times the network's metrics are made of (plain data)."""

from __future__ import annotations

import datetime as dt

import pytest

from kuberaven.network.backends.openstack_context import request_route
from kuberaven.network.rules.translate import since_creation


@pytest.mark.parametrize(
    ("url", "route"),
    [
        ("http://127.0.0.1:9696/v2.0/ports?fields=id&status=DOWN", "/v2.0/ports"),
        ("http://127.0.0.1:9696/v2.0/ports/7dfd0c09-0cc7-4cc6-8cac-06c9fadcebf4", "/v2.0/ports/{id}"),
        (
            "http://h/v2/lbaas/loadbalancers/7dfd0c090cc74cc68cac06c9fadcebf4/stats",
            "/v2/lbaas/loadbalancers/{id}/stats",
        ),
        (
            "http://h/v2.0/routers/7dfd0c09-0cc7-4cc6-8cac-06c9fadcebf4/add_router_interface",
            "/v2.0/routers/{id}/add_router_interface",
        ),
        ("http://h/v2.0/networks/12/tags", "/v2.0/networks/{id}/tags"),
        ("http://h/v3/auth/tokens", "/v3/auth/tokens"),
    ],
)
def test_a_requests_route_names_its_api_not_its_resource(url: str, route: str) -> None:
    assert request_route(url) == route


def test_a_pods_wiring_time_counts_from_its_creation() -> None:
    now = dt.datetime(2026, 11, 28, 12, 0, 3, 500000, tzinfo=dt.UTC)
    assert since_creation({"metadata": {"creationTimestamp": "2026-11-28T12:00:00Z"}}, now) == 3.5
    assert since_creation({"metadata": {}}, now) is None
    # A clock behind the API server's counts no negative time.
    assert since_creation({"metadata": {"creationTimestamp": "2026-11-28T12:00:05Z"}}, now) == 0.0
