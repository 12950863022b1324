"""The plugin's watcher (WATCHERS): the phase of each instance's pod, as the cluster reports it.

    kuberaven run ──► shared Pod informer (the inventory's own list+watch) ──► PodPhases
                      ──► phases["namespace/pod"] of the pods in the plugin's slices
                          (slice label simpleexample-<instance>); a log line when one starts Running

A watcher reads only what it declares (``fields``): the shared informer
decodes the pods' labels and phase for it, nothing more.
"""

from __future__ import annotations

import logging

from kuberaven.kube.reflector import WatchEvent
from kuberaven.provisioning.manifests import SLICE_LABEL
from kuberaven.watch.watcher import Watcher, WatchTarget

log = logging.getLogger(__name__)
SLICE_PREFIX = "simpleexample-"  # the policy's slices: simpleexample-<instance>
RUNNING = "Running"


class PodPhases:
    """The latest phase of each of the plugin's pods."""

    def __init__(self) -> None:
        self.phases: dict[str, str] = {}

    async def __call__(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        if not (meta.get("labels") or {}).get(SLICE_LABEL, "").startswith(SLICE_PREFIX):
            return
        key = f"{meta['namespace']}/{meta['name']}"
        if event.type == "DELETED":
            self.phases.pop(key, None)
            return
        phase = (event.object.get("status") or {}).get("phase", "")
        if phase == RUNNING and self.phases.get(key) != RUNNING:
            log.info("simpleexampleservice pod %s is running", key)
        self.phases[key] = phase


POD_PHASES = PodPhases()
POD_PHASE_WATCHER = Watcher(
    WatchTarget("v1", "Pod"),
    POD_PHASES,
    name="simpleexampleservice-pod-phases",
    fields=("metadata.labels", "status.phase"),
)
