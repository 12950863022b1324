"""Pod lifecycle log (pull/, Kubernetes → the daemon's log).

The first watcher ``kuberaven run`` ships: one log line per pod change. The
inventory watchers that mirror pods into the data model will join it here.
"""

from __future__ import annotations

import logging

from ..kube.reflector import WatchEvent
from ..raven.watcher import Watcher, WatchTarget

log = logging.getLogger("kuberaven.pods")


def describe(event: WatchEvent) -> str:
    pod = event.object
    meta = pod["metadata"]
    status = pod.get("status") or {}
    restarts = sum(c.get("restartCount", 0) for c in status.get("containerStatuses") or ())
    return (
        f"{event.type:<8} pod {meta.get('namespace')}/{meta['name']} phase={status.get('phase', '-')} "
        f"ip={status.get('podIP', '-')} node={(pod.get('spec') or {}).get('nodeName', '-')} restarts={restarts}"
    )


async def log_pod(event: WatchEvent) -> None:
    log.info("%s", describe(event))


def pod_log_watcher() -> Watcher:
    watcher = Watcher(WatchTarget("v1", "Pod"), log_pod, name="pod-log")
    watcher.on_synced = lambda: log.info("initial pod list handled; following changes")
    return watcher
