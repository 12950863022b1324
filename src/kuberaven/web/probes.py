"""The daemon's outermost ASGI app (web/): probes and metrics at once, the REST API and UI on first use.

    request ──► ProbesApp ──GET/HEAD /healthz /readyz /metrics──► answered here (no web framework)
                          └─anything else──► the FastAPI app (app.py), built and imported on the first such request

Why: a daemon that only its probes and Prometheus talk to (the usual case)
need not carry FastAPI, its routes and their pydantic models (about 10 MiB
of the idle RSS, docs/benchmarks.md). The answers are the same as app.py's
own routes for these paths, which stay there (the OpenAPI document lists
them, and tests drive create_app directly); anything else, other methods on
these paths included, goes to that app unchanged, so the REST API, its
guards and its errors are the ones create_app makes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Readiness = Callable[[], tuple[bool, dict[str, Any]]]

HEALTHZ, READYZ, METRICS = "/healthz", "/readyz", "/metrics"
PROBE_METHODS = frozenset({"GET", "HEAD"})
TEXT = b"text/plain; charset=utf-8"
JSON = b"application/json"
_encode = msgspec.json.Encoder().encode


class ProbesApp:
    """``ready``: what /readyz answers; ``full``: makes the whole app (called once, on the first other request)."""

    def __init__(self, ready: Readiness, full: Callable[[], ASGIApp]) -> None:
        self.ready = ready
        self._make_full = full
        self._full: ASGIApp | None = None

    @property
    def loaded(self) -> bool:
        """Whether the whole app was made (a request other than a probe came)."""
        return self._full is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in PROBE_METHODS and scope["path"] in PROBES:
            status, content_type, body = await PROBES[scope["path"]](self)
            await _respond(send, status, content_type, b"" if scope["method"] == "HEAD" else body, len(body))
            return
        if self._full is None:
            # Synchronous on purpose: no other request can see a half-made app (one import of FastAPI).
            self._full = self._make_full()
        await self._full(scope, receive, send)

    async def _healthz(self) -> tuple[int, bytes, bytes]:
        return 200, TEXT, b"ok\n"

    async def _readyz(self) -> tuple[int, bytes, bytes]:
        # In a worker thread as FastAPI runs a plain-def route: readiness may ask the database.
        is_ready, body = await asyncio.to_thread(self.ready)
        return 200 if is_ready else 503, JSON, _encode(body)

    async def _metrics(self) -> tuple[int, bytes, bytes]:
        return 200, CONTENT_TYPE_LATEST.encode(), await asyncio.to_thread(generate_latest)


PROBES: dict[str, Callable[[ProbesApp], Awaitable[tuple[int, bytes, bytes]]]] = {
    HEALTHZ: ProbesApp._healthz,
    READYZ: ProbesApp._readyz,
    METRICS: ProbesApp._metrics,
}


async def _respond(send: Send, status: int, content_type: bytes, body: bytes, length: int) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(length).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
