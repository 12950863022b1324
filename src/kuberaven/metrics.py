"""Prometheus metrics of every loop (served on /metrics by web/probes.py).

Names follow controller-runtime's where one fits (workqueue_*), prefixed
``kuberaven_``. The queue and handler metrics share one label, ``watcher``:
the name of a watcher's event queue (watch/queue.py), of a reconciler's work
queue and controller (watch/workqueue.py, watch/controller.py; the network
translation's among them), or the inventory's queue of a cluster.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

WATCH_EVENTS = Counter("kuberaven_watch_events", "Watch events received, by resource and type", ["resource", "type"])
RELISTS = Counter("kuberaven_relists", "Full LISTs made (cold start or 410 Gone)", ["resource"])
WATCH_GONE = Counter("kuberaven_watch_gone", "410 Gone answers (resourceVersion too old)", ["resource"])
WATCH_RECONNECTS = Counter(
    "kuberaven_watch_reconnects", "Watch reconnects after an error or a stalled stream", ["resource"]
)
QUEUE_DEPTH = Gauge(
    "kuberaven_workqueue_depth",
    "Work waiting in a queue: a watcher's objects with events pending, a reconciler's keys ready, "
    "the inventory's watch events and bookmarks not yet written",
    ["watcher"],
)
QUEUE_LATENCY = Histogram(
    "kuberaven_workqueue_queue_duration_seconds",
    "Seconds from a watcher's event arriving, or a reconciler's key being queued, to its handler starting",
    ["watcher"],
    buckets=_LATENCY_BUCKETS,
)
HANDLER_LATENCY = Histogram(
    "kuberaven_handler_duration_seconds",
    "Seconds one call of a watcher's translate() or a reconciler's reconcile() took",
    ["watcher"],
    buckets=_LATENCY_BUCKETS,
)
HANDLER_ERRORS = Counter(
    "kuberaven_handler_errors",
    "Calls of a watcher's translate() or a reconciler's reconcile() that raised (a Waiting not counted)",
    ["watcher"],
)
RETRIES = Counter(
    "kuberaven_workqueue_retries",
    "Retries after a backoff scheduled, per object (watcher) or key (reconciler)",
    ["watcher"],
)
LAG = Gauge(
    "kuberaven_watch_lag_seconds",
    "A watcher's queue: age of the event its handler last started on; 0 once the queue is empty",
    ["watcher"],
)
LEADER = Gauge("kuberaven_leader", "1 while this process owns at least one cluster")
CLUSTER_OWNED = Gauge("kuberaven_cluster_owned", "1 while this replica owns the cluster (its Lease)", ["cluster"])
INVENTORY_BATCH = Histogram(
    "kuberaven_inventory_batch_seconds", "Time to commit one inventory batch", buckets=_LATENCY_BUCKETS
)
INVENTORY_ITEMS = Counter("kuberaven_inventory_items", "Watch events and bookmarks committed by the inventory")
INVENTORY_FAILURES = Counter("kuberaven_inventory_failures", "Inventory batches that failed and were retried")
EVENTS_WRITTEN = Counter("kuberaven_events_written", "Pod events written to the outbox", ["status"])
EVENTS_PUBLISHED = Counter("kuberaven_events_published", "Outbox events Kafka acknowledged")
EVENTS_PUBLISH_ERRORS = Counter("kuberaven_events_publish_errors", "Kafka delivery failures (retried)")
OUTBOX_PENDING = Gauge("kuberaven_outbox_pending", "Outbox events not yet acknowledged by Kafka")
SYNC_APPLY_SECONDS = Histogram(
    "kuberaven_sync_apply_seconds", "Time to apply one row to Kubernetes", ["model"], buckets=_LATENCY_BUCKETS
)
POLICY_RUNS = Counter("kuberaven_policy_runs", "Model policy calls, by model and outcome", ["model", "outcome"])
COMPONENT_RESTARTS = Counter(
    "kuberaven_component_restarts", "Restarts of a daemon component after it crashed", ["component"]
)
COMPONENT_STATE = Gauge(
    "kuberaven_component_state",
    "1 for the state each daemon component is in (runtime/supervisor.py)",
    ["component", "state"],
)
POOL_PORTS_MADE = Counter("kuberaven_network_pool_ports_made", "Neutron ports made for port pools", ["cluster"])
POOL_SUBPORTS_MADE = Counter(
    "kuberaven_network_pool_subports_made",
    "Neutron ports made for nested nodes' pools and attached to their trunks as subports (also in pool_ports_made)",
    ["cluster"],
)
POOL_TAKES = Counter(
    "kuberaven_network_pool_takes",
    "Pods given a pooled port: from their own pool, or another of their node and namespace with their groups set",
    ["cluster", "source"],
)
POOL_EMPTY = Counter(
    "kuberaven_network_pool_empty", "Times a pod found no free port on its node and namespace, and waited", ["cluster"]
)
POOL_RECYCLED = Counter(
    "kuberaven_network_pool_recycled", "Pooled ports back in their pool from gone pods", ["cluster"]
)
POOL_FREE = Gauge("kuberaven_network_pool_free_ports", "Free ports in the cluster's port pools", ["cluster"])
OPENSTACK_REQUEST_SECONDS = Histogram(
    "kuberaven_openstack_request_seconds",
    "Neutron, Octavia and Keystone requests, from sent to answered, by method and route (ids as {id})",
    ["method", "route"],
    buckets=_LATENCY_BUCKETS,
)
POD_WIRING_SECONDS = Histogram(
    "kuberaven_network_pod_wiring_seconds",
    "From a pod's creation (whole seconds, as Kubernetes keeps it) to its VIF annotation written (step=vif) "
    "and to its port ACTIVE in the backend (step=active)",
    ["step"],
    buckets=_LATENCY_BUCKETS,
)
