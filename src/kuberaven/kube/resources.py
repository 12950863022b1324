"""Which REST path serves a kind (kube/): discovery of any group/version/kind.

A Watcher names its resource as ``apiVersion`` + ``kind``, built-in or custom;
discovery (``/api/v1``, ``/apis/<group>/<version>``) turns that into the plural
and the scope once per process.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from .client import KubeClient
from .errors import NotFound


class UnknownKind(LookupError):
    """The API server does not serve this apiVersion/kind."""


@dataclass(frozen=True)
class Resource:
    """One kind as the API server serves it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    scalable: bool = False  # serves the scale subresource (spec.replicas of any kind, custom ones included)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """Short stable name for metrics and positions, e.g. ``pods`` or ``deployments.apps``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


def split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class Discovery:
    """Caches the API server's answers to 'which resources does group/version serve'."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._cache: dict[str, dict[str, Resource]] = {}
        # The request in flight per group/version: the informers start together, and seven of them resolve
        # v1 at once; they share one answer (the start-up asked /api/v1 four times).
        self._fetching: dict[str, asyncio.Task[dict[str, Resource]]] = {}

    async def resolve(self, api_version: str, kind: str) -> Resource:
        by_kind = self._cache.get(api_version)
        if by_kind is None:
            by_kind = await self._fetch_once(api_version)
        try:
            return by_kind[kind]
        except KeyError:
            known = ", ".join(sorted(by_kind)) or "none"
            raise UnknownKind(f"{api_version} serves no kind {kind!r} (it serves: {known})") from None

    def forget(self, api_version: str) -> None:
        """Drop a cached answer, e.g. after a CRD was installed."""
        self._cache.pop(api_version, None)

    async def _fetch_once(self, api_version: str) -> dict[str, Resource]:
        fetching = self._fetching.get(api_version)
        if fetching is None:
            fetching = asyncio.create_task(self._fetch(api_version), name=f"discovery of {api_version}")
            self._fetching[api_version] = fetching
            fetching.add_done_callback(lambda _: self._fetching.pop(api_version, None))
        # Shielded: one caller cancelled (its informer stopping) does not cancel the others' answer.
        by_kind = await asyncio.shield(fetching)
        self._cache[api_version] = by_kind
        return by_kind

    async def _fetch(self, api_version: str) -> dict[str, Resource]:
        group, version = split_api_version(api_version)
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            listing = await self._client.request("GET", path)
        except NotFound:
            raise UnknownKind(f"the API server does not serve {api_version}") from None
        items = listing.get("resources", [])
        scalable = {item["name"].partition("/")[0] for item in items if item["name"].endswith("/scale")}
        return {
            item["kind"]: Resource(
                group, version, item["kind"], item["name"], item["namespaced"], scalable=item["name"] in scalable
            )
            for item in items
            if "/" not in item["name"]  # subresources such as pods/status
        }
