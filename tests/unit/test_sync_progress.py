"""The initial-sync progress line (runtime/health.py) from recorded /readyz watch entries."""

from __future__ import annotations

import json

from kuberaven.component_status import ComponentStatus as S
from kuberaven.component_status import as_json
from kuberaven.runtime.health import describe_initial_sync, lists_made, readiness

# As Inventory.status() and NetworkTranslator.status() report them part-way through a cold start.
WATCHES = [
    S(target="kubernetes/namespaces", synced=True, connected=True, listed=12, expected=12, written=12),
    S(target="kubernetes/pods", synced=False, connected=False, listed=2300, expected=10000, written=1800),
    S(
        target="v1/Pod",
        synced=False,
        connected=False,
        listed=700,
        expected=None,
        queued=40,
        component="network",
        backend="embedded",
    ),
    S(component="network", target="load balancers", queued=0),
]


def test_names_each_unsynced_watch_with_its_share_of_the_list() -> None:
    line = describe_initial_sync(WATCHES, 12.4)
    assert line == (
        "initial sync, 12s: kubernetes/pods 2300/10000 listed (23%), 1800 written; "
        "network v1/Pod 700 listed (1 of 3 watches synced)"
    )


def test_a_list_the_server_does_not_count_shows_the_count_alone() -> None:
    # remainingItemCount is absent for selector lists; an empty cluster lists 0 of 0.
    watches = [S(target="a", synced=False, listed=0, expected=0), S(target="b", synced=False, listed=5, expected=None)]
    assert describe_initial_sync(watches, 0.2) == "initial sync, 0s: a 0 listed; b 5 listed (0 of 2 watches synced)"


def test_a_shared_list_is_counted_once_in_the_summary() -> None:
    # The pods' informer lists once; the inventory and the translator each report its progress too.
    watches = [
        *WATCHES,
        S(target="v1/Pod", component="informers", cluster="kubernetes", listed=10000, synced=True),
        S(target="v1/Namespace", component="informers", cluster="kubernetes", listed=12, synced=True),
    ]
    assert lists_made(watches) == {"kubernetes/v1/Pod": 10000, "kubernetes/v1/Namespace": 12}
    assert sum(lists_made(WATCHES).values()) == 12 + 2300 + 700  # no shared informers: each watch listed its own


def test_a_backlog_without_a_list_of_its_own_shows_what_is_queued() -> None:
    # A consumer of shared informers: synced once they are, its backlog is all it has to tell.
    watches = [S(component="network", target="v1/Service", synced=False, queued=3), S(target="v1/Pod", synced=False)]
    assert (
        describe_initial_sync(watches, 3)
        == "initial sync, 3s: network v1/Service 3 queued; v1/Pod 0 queued (0 of 2 watches synced)"
    )


class Reporting:
    def __init__(self, ready: bool, *statuses: S) -> None:
        self.is_ready, self.statuses = ready, list(statuses)

    def ready(self) -> bool:
        return self.is_ready

    def status(self) -> list[S]:
        return self.statuses


def test_readyz_shows_only_the_fields_each_component_reports_and_null_for_unknown_values() -> None:
    ready, body = readiness([Reporting(True, *WATCHES[2:]), Reporting(False, S(sync="kubernetes", passes=0))])
    assert not ready and body["ready"] is False  # one component not ready: the daemon is not
    assert as_json(body["watches"]) == [
        {
            "target": "v1/Pod",
            "synced": False,
            "connected": False,
            "listed": 700,
            "expected": None,  # the API server did not count the list: null, not left out
            "queued": 40,
            "component": "network",
            "backend": "embedded",
        },
        {"component": "network", "target": "load balancers", "queued": 0},
        {"sync": "kubernetes", "passes": 0},
    ]
    shared = as_json([S(component="informers", consumers=("network", "inventory"))])
    assert json.loads(json.dumps(shared)) == [{"component": "informers", "consumers": ["network", "inventory"]}]
    assert readiness([]) == (False, {"ready": False, "watches": []})  # nothing running is not ready
