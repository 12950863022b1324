"""The node's pods and their VIFs (node/): what the agent's informer has seen, and waiting for what it has not.

    API server ──list+watch, spec.nodeName=<node>──► SharedInformer (watch/informers.py)
        ──► AgentPods.on_event: key → (uid, the kuberaven.io/vif text, kuberaven.io/port-failed), nothing else
              └─► wakes the ADDs waiting on that key
    ADD / CHECK ──► AgentPods.wait(key, uid, ready, timeout) ──► the Vif once ready(vif), else TRY_AGAIN_LATER;
                    NO_PORT at once when the translator says the pod gets no port until a user acts

The informer decodes a pod's name, namespace, uid and annotations only
(kube/projection.py); of the annotations this keeps the VIF's text. Nothing
here asks the API server: an ADD whose VIF has not come yet waits for the
watch to bring it, each event waking only the calls waiting on its pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..cni.spec import CniError, ErrorCode
from ..kube.reflector import WatchEvent
from ..network.vif import PORT_FAILED_ANNOTATION, VIF_ANNOTATION, Vif, VifError

log = logging.getLogger(__name__)
FIELDS = ("metadata.annotations",)  # besides kube/projection.py's IDENTITY (name, namespace, uid)
NO_PORT_DETAILS = (
    "kuberaven's translator wrote it (kuberaven.io/port-failed; `kubectl describe pod` shows it as a Warning): "
    "raise the project's port quota, or give the namespace a larger subnet (NETWORK_NAMESPACE_PREFIX)"
)


@dataclass(frozen=True)
class Seen:
    """One pod as the watch last gave it: its uid, its VIF annotation's text (None: none yet), and why it gets no
    port (the translator's kuberaven.io/port-failed; None: nothing a user must act on)."""

    uid: str
    vif: str | None
    failed: str | None = None


class AgentPods:
    """The node's pods by ``namespace/name``: a consumer of the agent's one shared informer."""

    def __init__(self) -> None:
        self.pods: dict[str, Seen] = {}
        self.synced = False
        self._waiters: dict[str, set[asyncio.Event]] = {}

    # -- ReflectorListener ------------------------------------------------------

    def on_event(self, event: WatchEvent) -> None:
        key = event.key
        if event.type == "DELETED":
            self.pods.pop(key, None)
        else:
            meta = event.object["metadata"]
            annotations = meta.get("annotations") or {}
            self.pods[key] = Seen(
                meta.get("uid", ""), annotations.get(VIF_ANNOTATION), annotations.get(PORT_FAILED_ANNOTATION)
            )
        for waiter in self._waiters.get(key, ()):
            waiter.set()

    def on_bookmark(self, resource_version: str) -> None:
        """Nothing: the agent keeps no position (a restart lists its node's pods again)."""

    def on_synced(self) -> None:
        self.synced = True

    async def wait_for_room(self) -> None:
        """Never full: an event is a dict assignment."""

    # -- what the agent's calls read -----------------------------------------------

    def vif(self, key: str, uid: str | None) -> Vif | str:
        """The pod's VIF, or why there is none (yet). A VIF this code cannot read is DECODE_FAILURE; no VIF and the
        translator's word that none comes until a user acts (a quota, a subnet's addresses) is NO_PORT."""
        seen = self.pods.get(key)
        if seen is None:
            return "the agent's watch of this node's pods has not seen it" if self.synced else "the watch is syncing"
        if uid not in (None, seen.uid):
            return f"the pod is another one (uid {seen.uid}, not {uid})"
        if seen.vif is None and seen.failed:
            raise CniError(ErrorCode.NO_PORT, f"pod {key}: no port: {seen.failed}", NO_PORT_DETAILS)
        if seen.vif is None:
            return f"the pod has no {VIF_ANNOTATION} annotation"
        try:
            return Vif.from_json(seen.vif)
        except VifError as error:
            raise CniError(ErrorCode.DECODE_FAILURE, str(error)) from None

    async def wait(self, key: str, uid: str | None, ready: Callable[[Vif], bool], timeout: float) -> Vif | str:
        """The pod's VIF once ``ready(vif)``, waiting for the watch up to ``timeout`` seconds; else the last
        reason it was not (a Vif not ready, or why there is none)."""
        deadline = time.monotonic() + timeout
        waiter = asyncio.Event()
        self._waiters.setdefault(key, set()).add(waiter)
        said = False
        try:
            while True:
                found = self.vif(key, uid)
                if isinstance(found, Vif) and ready(found):
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    return found
                if not said:  # once per call: the log shows which calls wait on the watch, and for what
                    log.info("%s: waiting up to %.1f s for the watch: %s", key, left, _why(found))
                    said = True
                waiter.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.wait(), left)
        finally:
            waiters = self._waiters[key]
            waiters.discard(waiter)
            if not waiters:
                del self._waiters[key]


def _why(found: Vif | str) -> str:
    return found if isinstance(found, str) else f"port {found.port} is {found.status}"
