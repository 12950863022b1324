"""What the web server serves besides the model API (web/), on a real uvicorn: the page's asset URLs for
whatever Host a visitor used, /docs from local files only, and apply's errors located in the body."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx2 as httpx
import pytest

from kuberaven.model import Database
from kuberaven.web.app import create_app
from tests.helpers import serving

ASSET = re.compile(r'(?:src|href)="((?!data:)[^"]+)"')  # not the inline (empty) icon


@pytest.fixture
def site(database: Database) -> Iterator[httpx.Client]:
    with serving(create_app(database)) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def test_asset_urls_follow_each_visitors_host(site: httpx.Client) -> None:
    """Two visitors through two names (a port-forward on another port, say): each page's scripts and
    styles point at the Host that visitor used, not at the first visitor's."""
    pages = {host: site.get("/", headers={"Host": host}).text for host in ("127.0.0.1:18080", "localhost:9999")}
    for host, page in pages.items():
        assets = ASSET.findall(page)
        assert any(a.endswith("/static/style.css") for a in assets), page
        assert any(a.endswith("/static/app.js") for a in assets), page
        local = [a for a in assets if "/static/" in a]
        assert local and all(a.startswith(f"http://{host}/") for a in local), (host, local)
    for asset in ASSET.findall(pages["127.0.0.1:18080"]):  # and they are served
        if "/static/" in asset:
            assert site.get(asset.replace("http://127.0.0.1:18080", "")).status_code == 200, asset


def test_docs_load_only_local_assets(site: httpx.Client) -> None:
    page = site.get("/docs")
    assert page.status_code == 200
    assets = ASSET.findall(page.text) + re.findall(r"url: '([^']+)'", page.text)
    assert len(assets) >= 4, page.text  # stylesheet, icon, script, the OpenAPI document
    assert all(a.startswith("/") and not a.startswith("//") for a in assets), assets
    assert "http" not in page.text.replace("http-equiv", ""), "no URL of another host"
    for asset in assets:
        served = site.get(asset)
        assert served.status_code == 200, asset
        assert served.content, asset
    assert "SwaggerUIBundle" in site.get("/docs/assets/swagger-ui-bundle.js").text
    assert site.get("/openapi.json").json()["openapi"].startswith("3.1")  # what Swagger UI 5 renders
    assert site.get("/redoc").status_code == 404  # it would load its script from a CDN


@pytest.mark.parametrize(
    ("body", "content_type", "says"),
    [
        (
            json.dumps(
                [
                    {"kind": "TrustDomain", "name": "shop", "owner": "kubernetes"},
                    {"kind": "Image", "name": "Not An Image!"},
                ]
            ),
            "application/json",
            "document 2: Image.name: 'Not An Image!' is not an image name",
        ),
        ('{"kind": "Gadget", "name": "x"}', "application/json", "document 1: Gadget: unknown kind"),
        (
            "- kind: TrustDomain\n  name: shop\n  owner: kubernetes\n- kind: Gadget\n",
            "application/yaml",
            "line 4: Gadget: unknown kind",
        ),
        ("- kind: TrustDomain\n  name: [unclosed\n", "application/yaml", "line 3: invalid YAML"),
        ("[]", "application/json", "no model objects in the body"),
    ],
)
def test_apply_errors_name_the_document_or_line(site: httpx.Client, body: str, content_type: str, says: str) -> None:
    """Not ``request body:1: …``: a page's JSON is all on line 1, so a JSON body's error names the document."""
    answer = site.post("/api/v1/apply", content=body, headers={"Content-Type": content_type})
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"].startswith(says), answer.json()
    assert site.get("/api/v1/TrustDomain", params={"name": "shop"}).json()["total"] == 0  # nothing stored


def test_the_network_listings_are_documented_and_refuse_bad_paging(site: httpx.Client) -> None:
    """Their rows come from the translator (tests/integration/test_web_ui.py runs it); here: the contract."""
    paths = site.get("/openapi.json").json()["paths"]
    for what in ("networks", "ports", "loadbalancers", "policies"):
        assert paths[f"/api/v1/network/{what}"]["get"]["description"], what
        empty = site.get(f"/api/v1/network/{what}", params={"namespace": "nowhere"})
        assert empty.status_code == 200 and empty.json() == {
            "kind": what,
            "total": 0,
            "limit": 100,
            "offset": 0,
            "items": [],
        }
    assert site.get("/api/v1/network/ports", params={"limit": 0}).status_code == 422
    assert "offset" in site.get("/api/v1/network/ports", params={"offset": "x"}).json()["detail"]
    assert site.get("/api/v1/network/routers").status_code == 404
