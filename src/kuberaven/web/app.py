"""The HTTP server of ``kuberaven run`` (web/): probes, metrics, the REST API and the UI in one app.

/healthz /readyz /metrics          open (probes and scrapers)
/api/v1/...  (api.py, feeds.py)     bearer token when one is configured (auth.py)
/  /static/  (ui.py)                the page; its data comes from /api/v1
/docs /openapi.json                 interactive API documentation
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import version

import uvicorn
from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..model import Database
from ..raven.health import Component, readiness
from .api import models_router
from .auth import BearerToken
from .errors import install_error_handlers
from .feeds import feeds_router
from .ui import install_ui

MAX_BODY_BYTES = 1 << 20


def create_app(
    database: Database, components: Callable[[], Sequence[Component]] = list, token: str | None = None
) -> FastAPI:
    app = FastAPI(
        title="kuberaven",
        version=version("kuberaven"),
        description="Kubernetes ⇄ SQL model ⇄ Kafka: the data model, the pod event log and the network translation.",
    )
    install_error_handlers(app)

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Callable) -> Response:  # type: ignore[type-arg]
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_BODY_BYTES:
            return JSONResponse(
                {"detail": f"request body is {int(length)} bytes; at most {MAX_BODY_BYTES} are accepted"},
                status_code=413,
            )
        return await call_next(request)

    @app.get("/healthz", response_class=PlainTextResponse, tags=["operations"])
    def healthz() -> str:
        return "ok\n"

    @app.get("/readyz", tags=["operations"])
    def readyz() -> JSONResponse:
        ready, body = readiness(components())
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics", tags=["operations"])
    def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    authenticated = [Depends(BearerToken(token))]
    # Feeds first: /api/v1/events must not be taken for a model kind named "events".
    app.include_router(feeds_router(database), dependencies=authenticated)
    app.include_router(models_router(database), dependencies=authenticated)
    install_ui(app)
    return app


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The daemon owns SIGINT/SIGTERM and stops the server itself.
        yield


def web_server(listen: str, app: FastAPI) -> uvicorn.Server:
    host, _, port = listen.rpartition(":")
    config = uvicorn.Config(app, host=host or "127.0.0.1", port=int(port), log_level="warning", lifespan="off")
    return _Server(config)
