"""The web UI's JavaScript libraries (web/): uPlot and Cytoscape.js, served from this process, never a CDN.

    make web-libs ──► npm ci in web/libs/ (package.json + package-lock.json pin the versions) ──► node_modules/
    GET /libs/<name> ──► that file of node_modules (LIBS names the few the page loads); 404 when not installed

No build step: the packages' own browser builds (UMD / IIFE), as /docs serves
Swagger UI's. A page whose libraries are missing still lists and searches;
it shows a note where a plot or the network picture would be.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse

from ..model.errors import DoesNotExist

MODULES = Path(__file__).parent / "libs" / "node_modules"
LIBS = {
    "uplot.js": "uplot/dist/uPlot.iife.min.js",
    "uplot.css": "uplot/dist/uPlot.min.css",
    "cytoscape.js": "cytoscape/dist/cytoscape.min.js",
}
MEDIA = {".js": "text/javascript", ".css": "text/css"}
CACHE = "public, max-age=3600"


def install_libs(app: FastAPI, modules: Path = MODULES) -> None:
    """``modules``: the node_modules folder the files come from (tests point it at an empty one)."""

    @app.get("/libs/{name}", include_in_schema=False)
    def library(name: str) -> FileResponse:
        found = LIBS.get(name)
        path = modules / found if found else None
        if path is None or not path.is_file():
            raise DoesNotExist(f"{name}: not installed (make web-libs)")
        return FileResponse(path, media_type=MEDIA[path.suffix], headers={"Cache-Control": CACHE})
