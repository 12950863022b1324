"""The web UI (web/): one page and its script, served as files; all data comes from /api/v1.

No build step: templates/index.html (Jinja2, only for the version and the
cluster list's first paint) and static/app.js, plain JavaScript that reads
the API and listens to the event stream.
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
    page_context = {"version": version("kuberaven")}

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index(request: Request) -> HTMLResponse:
        return templates.TemplateResponse(request, "index.html", page_context)

    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
