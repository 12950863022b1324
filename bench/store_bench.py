"""The informers' slim store (watch/store.py): what a pod costs to hold, and what its readers pay.

In-process, no cluster: N pods of the bench's shape (bench/common.py's, with
what the API server and kuberaven add: uid, resourceVersion, phase, IP, the
VIF annotation) are decoded from one JSON list page by the store's own
projection, as the informer decodes them, and fed to a store that declares
what the network translator's listers declare (the pod's port and policy
fields, the VIF annotation). Then:

* held per pod: tracemalloc's traced bytes of the filled store, over N;
* an event: ``Store.update`` of a MODIFIED pod (slim, keep, index) and the
  ``previous`` its consumers read;
* a reconcile's read by key (``Lister.get``: the pods and Services
  reconcilers), and a NetworkPolicy sync's read of every pod
  (``Lister.all()``), beside what that sync then does with each pod (the
  policy's view of it: ``pod_port`` and ``pod_info``) for scale.
* (``by_index`` decodes each object it returns, as ``get`` does.)

``--before PATH`` runs the same in a child process with PATH first on
``PYTHONPATH`` (other code: e.g. a checkout's ``src``), rounds interleaved,
and prints both columns.

    python bench/store_bench.py [--pods 10000] [--rounds 3] [--before OTHER/src]
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import msgspec

from kuberaven.kube.reflector import WatchEvent
from kuberaven.network.backend import NetworkOptions
from kuberaven.network.rules.policy import POD_POLICY_FIELDS, pod_info
from kuberaven.network.rules.translate import POD_PORT_FIELDS, pod_port
from kuberaven.network.vif import VIF_ANNOTATION
from kuberaven.watch.store import Lister, Store
from kuberaven.watch.watcher import WatchTarget

NAMESPACE = "bench"
APPS = 50


def pod(i: int) -> dict[str, Any]:
    """bench/common.py's pod as the API server holds it once kuberaven made its port."""
    ip = f"10.{128 + i // 65536}.{i // 256 % 256}.{i % 256}"
    vif = {"port": str(uuid.uuid4()), "mac": f"fa:16:3e:00:{i // 256 % 256:02x}:{i % 256:02x}", "ip": ip}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{i:05d}",
            "namespace": NAMESPACE,
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(100000 + i),
            "creationTimestamp": "2026-11-24T10:00:00Z",
            "labels": {"app": f"app-{i % APPS}", "tier": "bench", "pod-template-hash": "5d8f7c6b9"},
            "annotations": {"bench.kuberaven.io/stamp": "0", VIF_ANNOTATION: json.dumps(vif)},
        },
        "spec": {
            "nodeName": "bench-node",
            "containers": [
                {
                    "name": "main",
                    "image": f"registry.example:5000/team/app-{i % APPS}:1.{i % 7}",
                    "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(8)],
                    "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                }
            ],
        },
        "status": {"phase": "Running", "podIP": ip},
    }


def per_call(calls: int, run: Callable[[], object]) -> float:
    """CPU microseconds a call, the best of three passes (the machine is shared: wall time would count waiting)."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best / calls * 1e6


def measure(n: int) -> dict[str, float]:
    store = Store()
    store.declare((*POD_PORT_FIELDS, *POD_POLICY_FIELDS), (VIF_ANNOTATION,), {})  # no index: as the daemon's
    page = msgspec.json.encode({"metadata": {}, "items": [pod(i) for i in range(n)]})
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    items = store.projection.page.decode(page)["items"] or []  # fresh strings, as the informer's decode gives
    for obj in items:
        store.update(WatchEvent("ADDED", obj))
    del items, obj  # what the store shares with them (the old form's strings) stays counted
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    events = [WatchEvent("MODIFIED", obj) for obj in store.projection.page.decode(page)["items"] or []]
    lister = Lister(store, WatchTarget("v1", "Pod"), None, None)  # type: ignore[arg-type]  # reads only
    keys = [e.key for e in events]
    options = NetworkOptions()

    def update() -> None:
        for event in events:
            store.update(event)
            _ = store.previous

    def view_all() -> None:
        for p in lister.all():
            spec = pod_port(p, options)
            if spec is not None:
                pod_info(p, spec.address)

    return {
        "held_bytes_per_pod": held / n,
        "update_us": per_call(n, update),
        "get_us": per_call(n, lambda: collections.deque(map(lister.get, keys), maxlen=0)),
        "all_ms": per_call(1, lambda: collections.deque(lister.all(), maxlen=0)) / 1000,
        "policy_view_ms": per_call(1, view_all) / 1000,
    }


ROWS = [
    ("held per pod (traced)", "held_bytes_per_pod", "{:.0f} B"),
    ("an event: update + previous, per pod", "update_us", "{:.1f} µs"),
    ("get by key, per pod", "get_us", "{:.2f} µs"),
    ("all() of every pod (a policy sync's read)", "all_ms", "{:.1f} ms"),
    ("the policy sync's read + pod_port/pod_info of each", "policy_view_ms", "{:.1f} ms"),
]


def child(n: int, pythonpath: str | None) -> dict[str, float]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, os.environ.get("PYTHONPATH")]))
    output = subprocess.run(
        [sys.executable, __file__, "--pods", str(n), "--child"], env=env, check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, float] = json.loads(output.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", help="PYTHONPATH of the code to compare with (its src first)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.pods)))
        return
    columns: dict[str, list[dict[str, float]]] = {"this code": [], "before": []}
    for _ in range(args.rounds):
        columns["this code"].append(child(args.pods, None))
        if args.before:
            columns["before"].append(child(args.pods, args.before))
    shown = [name for name, runs in columns.items() if runs]
    print(f"{args.pods} pods, median of {args.rounds} rounds; load average {os.getloadavg()[0]:.1f}")
    print("  ".join([f"{'measure':52}", *(f"{name:>12}" for name in shown)]))
    for label, field, form in ROWS:
        cells = [form.format(statistics.median(r[field] for r in columns[name])) for name in shown]
        print("  ".join([f"{label:52}", *(f"{cell:>12}" for cell in cells)]))


if __name__ == "__main__":
    main()
