"""The web app of ``kuberaven run`` (web/): probes, metrics, the REST API and the UI in one FastAPI app.

/healthz /readyz /metrics          open (probes and scrapers)
/api/v1/...  (api.py, feeds.py,     request guards (guards.py: size, Host, Origin, Content-Type),
  network.py, inventory.py)         then the bearer token when one is configured (auth.py)
/  /static/  (ui.py)                the page; its data comes from /api/v1
/libs/  (libs.py)                   uPlot and Cytoscape.js, installed by make (npm), never from a CDN
/api/v1/metrics/history             the last hour of the daemon's metrics (metric_history.py), for the plots
/docs /openapi.json                 interactive API documentation (docs.py: Swagger UI from a package, no CDN)

The daemon serves it behind probes.py (which answers the probes without it and makes it on the first
other request) with server.py's WebServer.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import msgspec
from fastapi import Depends, FastAPI, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..model import Database
from ..network.reach_backends import ReachBackends
from ..runtime.health import readiness
from .api import models_router
from .auth import BearerToken
from .docs import install_docs
from .errors import install_error_handlers
from .feeds import feeds_router
from .guards import HostRule, RequestGuard
from .inventory import inventory_router
from .libs import MODULES, install_libs
from .metric_history import MetricHistory
from .network import network_router
from .ui import install_ui

Readiness = Callable[[], tuple[bool, dict[str, Any]]]


def create_app(
    database: Database,
    ready: Readiness = lambda: readiness([]),
    token: str | None = None,
    hosts_rule: HostRule | None = None,
    backends: ReachBackends | None = None,
    history: MetricHistory | None = None,
    libs: Path = MODULES,
) -> FastAPI:
    """``ready``: what /readyz answers (the daemon's supervisor and database checks); ``hosts_rule``: the Host
    names served (HostRule.for_listener; by default any, as behind a token); ``backends``: what can-reach
    reads (by default the embedded tables, and OpenStack from the OS_* variables); ``history``: the daemon's
    metric history (by default one of the app's own, its thread started and stopped with the app's lifespan);
    ``libs``: where the page's JavaScript libraries are (libs.py)."""
    owned = history is None
    samples = MetricHistory() if history is None else history

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if owned:
            samples.start()
        try:
            yield
        finally:
            if owned:
                samples.stop()

    app = FastAPI(
        lifespan=lifespan,
        title="kuberaven",
        version=version("kuberaven"),
        description="Kubernetes ⇄ SQL model ⇄ Kafka: the data model, the pod event log and the network translation.",
        docs_url=None,  # docs.py serves /docs from local files
        redoc_url=None,  # ReDoc would load its script from a CDN: blank offline
    )
    install_error_handlers(app)
    app.add_middleware(RequestGuard, hosts_rule=hosts_rule or HostRule(None))

    @app.get("/healthz", response_class=PlainTextResponse, tags=["operations"])
    def healthz() -> str:
        return "ok\n"

    @app.get("/readyz", tags=["operations"])
    def readyz() -> JSONResponse:
        is_ready, body = ready()
        # The watches are ComponentStatus values: msgspec leaves out the fields that do not apply to each.
        return JSONResponse(msgspec.to_builtins(body), status_code=200 if is_ready else 503)

    @app.get("/metrics", tags=["operations"])
    def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    authenticated = [Depends(BearerToken(token))]

    @app.get("/api/v1/metrics/history", tags=["operations"], dependencies=authenticated)
    def metric_history() -> dict[str, Any]:
        """The daemon's own metrics over the last hour (one point every ``every`` s), as the Health tab plots them."""
        return samples.plots()

    # Feeds first: /api/v1/events must not be taken for a model kind named "events".
    app.include_router(feeds_router(database), dependencies=authenticated)
    app.include_router(network_router(database, backends), dependencies=authenticated)
    app.include_router(inventory_router(database), dependencies=authenticated)
    app.include_router(models_router(database), dependencies=authenticated)
    install_docs(app)
    install_libs(app, libs)
    install_ui(app)
    return app
