"""Request guards of the HTTP server (web/): what is refused before any handler runs.

    request ──► RequestGuard (ASGI middleware, outermost of the app's own)
                 ├─ body larger than MAX_BODY_BYTES ──► 413, counted as the bytes arrive (chunked bodies too)
                 ├─ Host not a name of this server ──► 403 (DNS rebinding: evil.example resolving to 127.0.0.1)
                 ├─ a write from another Origin ──► 403 (cross-site request forgery from a page the operator opens)
                 └─ a write whose Content-Type a page may send without asking (text/plain, forms) ──► 415
            ──► the app (auth.py's token, then api.py / feeds.py)

The rules are pure functions of the request's method and headers
(``refusal``), so that tests drive them with plain data.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException

MAX_BODY_BYTES = 1 << 20
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Content types a browser sends cross-site without a CORS preflight: a write must use another.
SIMPLE_CONTENT_TYPES = frozenset({"text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""})
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Refusal:
    status: int
    detail: str


@dataclass(frozen=True)
class HostRule:
    """Which Host names this server answers to; None: any (a token guards the API, see auth.py)."""

    hosts: frozenset[str] | None

    @classmethod
    def for_listener(cls, listen: str, token: str | None, allowed: Iterable[str] = ()) -> HostRule:
        """Without a token (loopback only) the Host must be a loopback name, the host of ``listen``
        (HOST:PORT) or an allowed name."""
        if token is not None:
            return cls(None)
        host = listen.rpartition(":")[0]
        return cls(frozenset({*LOOPBACK_NAMES, host.lower(), *(name.lower() for name in allowed)} - {""}))


def refusal(method: str, headers: dict[str, str], hosts_rule: HostRule) -> Refusal | None:
    """Why a request is refused before it reaches the app (None: it is not)."""
    host = headers.get("host", "")
    if hosts_rule.hosts is not None and _hostname(host) not in hosts_rule.hosts:
        return Refusal(
            403, f"Host {host!r} is not a name of this server (allowed: {', '.join(sorted(hosts_rule.hosts))})"
        )
    if method in SAFE_METHODS:
        return None
    origin = headers.get("origin")
    if origin is not None and origin.partition("://")[2].lower() != host.lower():
        return Refusal(403, f"a write from another origin ({origin}) is refused")
    length = headers.get("content-length", "")
    has_body = length not in ("", "0") or "transfer-encoding" in headers
    content_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    if content_type in SIMPLE_CONTENT_TYPES and has_body:
        shown = content_type or "none"
        return Refusal(415, f"a write needs Content-Type application/json or application/yaml, not {shown}")
    if length.isascii() and length.isdigit() and int(length) > MAX_BODY_BYTES:
        return Refusal(413, f"request body is {int(length)} bytes; at most {MAX_BODY_BYTES} are accepted")
    return None


def _hostname(host: str) -> str:
    """The name of a Host header, without its port ("[::1]:8080" → "[::1]")."""
    name, colon, port = host.lower().rpartition(":")
    return name if colon and port.isdigit() and not name.endswith(":") else host.lower()


class BodyTooLarge(HTTPException):
    """Raised while the body is read, wherever that is (FastAPI answers an HTTPException as is)."""

    def __init__(self) -> None:
        super().__init__(413, f"request body is over {MAX_BODY_BYTES} bytes; at most that is accepted")


class RequestGuard:
    """ASGI middleware applying ``refusal`` and counting body bytes as they are received."""

    def __init__(self, app: ASGIApp, hosts_rule: HostRule) -> None:
        self.app = app
        self.hosts_rule = hosts_rule

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)  # probes, metrics and the page's files carry no model data
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refused = refusal(scope["method"], headers, self.hosts_rule)
        if refused is not None:
            await _answer(send, refused)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > MAX_BODY_BYTES:
                raise BodyTooLarge
            return message

        await self.app(scope, counting_receive, send)


async def _answer(send: Send, refused: Refusal) -> None:
    body = json.dumps({"detail": refused.detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
