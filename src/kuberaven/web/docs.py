"""Interactive API documentation (web/): /docs, Swagger UI served from this process, never from a CDN.

    /docs          ──► FastAPI's get_swagger_ui_html, pointing at the files below and at /openapi.json
    /docs/assets/  ──► the Swagger UI distribution shipped by the swagger-ui-bundle-v2 package

So /docs works on a machine without Internet access (the files are part of the install).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]  # the package ships no type hints

DOCS = "/docs"
ASSETS = f"{DOCS}/assets"


def install_docs(app: FastAPI) -> None:
    """Serve /docs from local assets; the app must be made with ``docs_url=None`` (and no /redoc, which
    would load its script from a CDN too)."""

    @app.get(DOCS, response_class=HTMLResponse, include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        )

    app.mount(ASSETS, StaticFiles(directory=Path(str(swagger_ui_path))), name="swagger-ui")
