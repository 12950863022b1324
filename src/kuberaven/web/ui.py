"""The web UI (web/): one page and its scripts, served as files; all data comes from /api/v1.

No build step: templates/index.html (Jinja2, only for the version and the
asset URLs) and static/*.js, plain JavaScript that reads the API and listens
to the event stream:

    app.js        shared helpers (the API, elements, tabs, the live badge from /readyz)
    inventory.js  clusters → trust domains → slices → pods, Services, ConfigMaps, Secrets; details; deletes
    network.js    networks, ports, load balancers, NetworkPolicies, can-reach
    health.js     the components and watches of /readyz
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

HERE = Path(__file__).parent


def install_ui(app: FastAPI) -> None:
    templates = Jinja2Templates(directory=HERE / "templates")
    kuberaven_version = version("kuberaven")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index(request: Request) -> HTMLResponse:
        # A new context each request: Starlette stores the request in it, and url_for() builds the asset
        # URLs from that request's Host (a shared dict kept the first visitor's Host for everyone).
        return templates.TemplateResponse(request, "index.html", {"version": kuberaven_version})

    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
