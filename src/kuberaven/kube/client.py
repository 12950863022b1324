"""The connection to one Kubernetes API server (kube/: the only code that talks to it).

lightkube reads the kubeconfig (files, contexts, in-cluster service account,
exec plugins) and builds an authenticated httpx client; kuberaven keeps the
lightkube client for typed calls and sends hot-path requests (list, watch,
patch) through the same httpx client as plain JSON, decoded by msgspec into
dicts, which is several times cheaper than building typed models per object.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import lightkube
import msgspec
from lightkube.config.kubeconfig import KubeConfig

from .errors import ApiError, TooManyRequests, UnboundedList

FIELD_MANAGER = "kuberaven"  # server-side apply; also the managed-by label of what it makes (provisioning/manifests.py)
DEFAULT_PAGE = 500
_decode = msgspec.json.decode
_encode = msgspec.json.encode


def load_config(kubeconfig: str | Path | None = None, context: str | None = None) -> KubeConfig:
    """A kubeconfig from a file, or the usual places (KUBECONFIG, ~/.kube/config, in-cluster)."""
    config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
    if context:
        # Resolve now so that an unknown context fails at start-up, not on first use.
        config.get(context)
    return config


class KubeClient:
    """One API server connection: lightkube for typed calls, raw JSON for the hot path."""

    def __init__(
        self,
        config: KubeConfig,
        context: str | None = None,
        field_manager: str = FIELD_MANAGER,
        timeout: float = 10.0,
    ) -> None:
        single = config.get(context)
        self.lightkube = lightkube.AsyncClient(
            config=single, field_manager=field_manager, timeout=httpx.Timeout(timeout)
        )
        # lightkube exposes no public handle on its httpx client; watches with
        # bookmarks and custom timeouts need it (DESIGN.md: "send the request
        # through the httpx client it configured").
        self.http: httpx.AsyncClient = self.lightkube._client._client
        self.field_manager = field_manager
        assert single is not None  # from_kubeconfig resolved a context
        self.server = single.cluster.server

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | Path | None = None, context: str | None = None) -> KubeClient:
        return cls(load_config(kubeconfig, context), context)

    async def close(self) -> None:
        await self.lightkube.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: httpx.Timeout | float | None = None,
        decoder: msgspec.json.Decoder[Any] | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON answer (through ``decoder`` if given) or raise ApiError.

        A LIST must say ``limit``: nothing in kuberaven may load a whole cluster at once (UnboundedList).
        """
        if method == "GET" and is_collection(path) and not (params or {}).get("limit"):
            raise UnboundedList(f"LIST {path} without limit=: page it")
        content = None if body is None else (body if isinstance(body, bytes) else _encode(body))
        headers = {"Content-Type": content_type} if content is not None else None
        response = await self.http.request(
            method,
            path,
            params=_clean(params),
            content=content,
            headers=headers,
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )
        if response.status_code >= 400:
            raise error_from_response(response.status_code, response.content, response.headers)
        if not response.content:
            return None
        return decoder.decode(response.content) if decoder is not None else _decode(response.content)

    async def list_objects(
        self, path: str, params: Mapping[str, Any] | None = None, page_size: int = DEFAULT_PAGE
    ) -> AsyncIterator[dict[str, Any]]:
        """Every object of a collection, a page at a time (only one page is in memory)."""
        query = {**(params or {}), "limit": page_size}
        while True:
            page = await self.request("GET", path, params=query)
            for item in page.get("items") or ():
                yield item
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
            query["continue"] = token

    async def apply(self, path: str, manifest: dict[str, Any], *, force: bool = True) -> Any:
        """Server-side apply under our field manager."""
        params = {"fieldManager": self.field_manager, "force": "true" if force else None}
        return await self.request(
            "PATCH", path, params=params, body=manifest, content_type="application/apply-patch+yaml"
        )

    @asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, Any], timeout: httpx.Timeout
    ) -> AsyncIterator[httpx.Response]:
        """A streaming GET (watch); errors before the body starts raise ApiError."""
        request = self.http.build_request("GET", path, params=_clean(params), timeout=timeout)
        response = await self.http.send(request, stream=True)
        try:
            if response.status_code >= 400:
                await response.aread()
                raise error_from_response(response.status_code, response.content, response.headers)
            yield response
        finally:
            await response.aclose()


def is_collection(path: str) -> bool:
    """Whether ``path`` names a collection of a resource (a LIST), not one object, a subresource or discovery."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return False
    return len(rest) == 1 or (len(rest) == 3 and rest[0] == "namespaces")


def _clean(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if params is None:
        return None
    return {k: v for k, v in params.items() if v is not None}


def error_from_response(code: int, content: bytes, headers: Mapping[str, str]) -> ApiError:
    try:
        status = _decode(content)
        if not isinstance(status, dict):
            raise ValueError
    except (msgspec.DecodeError, ValueError):
        status = {"code": code, "reason": "", "message": content[:200].decode(errors="replace")}
    status.setdefault("code", code)
    error = ApiError.from_status(status, code)
    if isinstance(error, TooManyRequests):
        error.retry_after = _retry_after(headers.get("Retry-After"))
    return error


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
