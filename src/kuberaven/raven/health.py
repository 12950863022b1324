"""/healthz, /readyz and /metrics (raven/, how operators see the engine).

/healthz: the process's loop answers. /readyz: 200 only while every
reflector has synced and its stream is alive (not stale), with a JSON body
saying which are not. /metrics: Prometheus text format.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .engine import Engine

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HealthApp:
    """A minimal ASGI app; the REST API will mount beside it."""

    def __init__(self, engine_provider: Callable[[], Engine | None]) -> None:
        self._engine = engine_provider

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
            engine = self._engine()
            ready = engine is not None and engine.ready()
            body = {"ready": ready, "watches": engine.status() if engine else []}
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


def health_server(listen: str, engine_provider: Callable[[], Engine | None]) -> uvicorn.Server:
    host, _, port = listen.rpartition(":")
    config = uvicorn.Config(
        HealthApp(engine_provider), host=host or "127.0.0.1", port=int(port), log_level="warning", lifespan="on"
    )
    return _Server(config)
