"""/healthz, /readyz and /metrics (raven/, how operators see the engine).

/healthz: the process's loop answers. /readyz: 200 only while every
reflector has synced and its stream is alive (not stale), with a JSON body
saying which are not. /metrics: Prometheus text format.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Protocol

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest


class Component(Protocol):
    """A loop of the daemon with watches: the engine, the inventory."""

    async def run(self) -> None: ...
    def stop(self) -> None: ...
    def ready(self) -> bool: ...
    def status(self) -> list[dict[str, Any]]: ...


Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HealthApp:
    """A minimal ASGI app; the REST API will mount beside it."""

    def __init__(self, components: Callable[[], Sequence[Component]]) -> None:
        self._components = components

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope.get("path", "")
        if path == "/healthz":
            await _respond(send, 200, b"ok\n", "text/plain")
        elif path == "/readyz":
            components = self._components()
            ready = bool(components) and all(c.ready() for c in components)
            body = {"ready": ready, "watches": [w for c in components for w in c.status()]}
            await _respond(send, 200 if ready else 503, json.dumps(body).encode(), "application/json")
        elif path == "/metrics":
            await _respond(send, 200, generate_latest(), CONTENT_TYPE_LATEST)
        else:
            await _respond(send, 404, b"not found\n", "text/plain")


async def _respond(send: Send, status: int, body: bytes, content_type: str) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The daemon owns SIGINT/SIGTERM and stops the server itself.
        yield


def health_server(listen: str, components: Callable[[], Sequence[Component]]) -> uvicorn.Server:
    host, _, port = listen.rpartition(":")
    config = uvicorn.Config(
        HealthApp(components), host=host or "127.0.0.1", port=int(port), log_level="warning", lifespan="on"
    )
    return _Server(config)
