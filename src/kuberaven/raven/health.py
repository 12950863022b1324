"""Readiness of the daemon's loops (raven/, how operators see the engine; served by web/app.py).

/healthz: the process's loop answers. /readyz: 200 only while every
reflector has synced and its stream is alive (not stale), with a JSON body
saying which are not. /metrics: Prometheus text format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class Component(Protocol):
    """A loop of the daemon with watches: the engine, the inventory."""

    async def run(self) -> None: ...
    def stop(self) -> None: ...
    def ready(self) -> bool: ...
    def status(self) -> list[dict[str, Any]]: ...


def readiness(components: Sequence[Component]) -> tuple[bool, dict[str, Any]]:
    """Ready only while every component is; the body says which watch is not."""
    ready = bool(components) and all(c.ready() for c in components)
    return ready, {"ready": ready, "watches": [w for c in components for w in c.status()]}
