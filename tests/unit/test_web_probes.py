"""web/probes.py: the probes answered without the web framework, everything else by the app made on first use."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import MutableMapping
from typing import Any

import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from kuberaven.component_status import ComponentStatus
from kuberaven.web.probes import ASGIApp, ProbesApp, Receive, Scope, Send

Answer = tuple[int, dict[str, str], bytes]


class FullApp:
    """The app the probes app makes on first use: records what reached it."""

    def __init__(self) -> None:
        self.paths: list[tuple[str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.paths.append((scope["method"], scope["path"]))
        await send({"type": "http.response.start", "status": 418, "headers": []})
        await send({"type": "http.response.body", "body": b"full"})


class Probes:
    def __init__(self, ready: bool = True) -> None:
        self.made: list[FullApp] = []
        status = ComponentStatus(component="inventory", synced=ready)
        self.app = ProbesApp(lambda: (ready, {"ready": ready, "components": [status]}), self._make)

    def _make(self) -> ASGIApp:
        self.made.append(FullApp())
        return self.made[-1]

    def request(self, method: str, path: str) -> Answer:
        sent: list[MutableMapping[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": method, "path": path, "headers": []}
        asyncio.run(self.app(scope, receive, send))
        start, body = sent
        headers = {k.decode(): v.decode() for k, v in start.get("headers", [])}
        return start["status"], headers, body["body"]


def test_healthz_is_answered_without_making_the_full_app() -> None:
    probes = Probes()
    status, headers, body = probes.request("GET", "/healthz")
    assert (status, body, headers["content-type"]) == (200, b"ok\n", "text/plain; charset=utf-8")
    assert headers["content-length"] == "3"
    assert probes.made == [] and not probes.app.loaded


@pytest.mark.parametrize(("ready", "code"), [(True, 200), (False, 503)])
def test_readyz_answers_the_readiness_as_json(ready: bool, code: int) -> None:
    probes = Probes(ready)
    status, headers, body = probes.request("GET", "/readyz")
    assert (status, headers["content-type"]) == (code, "application/json")
    assert json.loads(body) == {"ready": ready, "components": [{"component": "inventory", "synced": ready}]}
    assert probes.made == []


def test_head_gives_the_headers_of_get_without_the_body() -> None:
    probes = Probes()
    _, _, full = probes.request("GET", "/readyz")
    status, headers, body = probes.request("HEAD", "/readyz")
    assert (status, body, headers["content-length"]) == (200, b"", str(len(full)))


def test_metrics_are_prometheus_text() -> None:
    probes = Probes()
    status, headers, body = probes.request("GET", "/metrics")
    assert status == 200 and headers["content-type"] == CONTENT_TYPE_LATEST
    assert b"kuberaven_" in body and probes.made == []


def test_every_other_request_goes_to_the_full_app_made_once() -> None:
    probes = Probes()
    assert probes.request("GET", "/api/v1/slices")[0] == 418
    assert probes.request("POST", "/healthz")[0] == 418  # another method on a probe's path: the app's answer
    assert probes.request("GET", "/")[2] == b"full"
    assert len(probes.made) == 1 and probes.app.loaded
    assert probes.made[0].paths == [("GET", "/api/v1/slices"), ("POST", "/healthz"), ("GET", "/")]


def test_the_daemon_imports_no_web_framework() -> None:
    # What `kuberaven run` imports before it serves: the CLI, the token's configuration, the daemon.
    code = (
        "import json, sys, kuberaven.cli, kuberaven.web.tokens, kuberaven.daemon; "
        "print(json.dumps([m for m in ('fastapi', 'starlette', 'kuberaven.web.app') if m in sys.modules]))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    assert loaded == []
