"""The network translator's garbage collection in pages (issue 26), on the embedded backend's real tables and
the local control plane: exactly the leaked resources go, across page boundaries, and a resource made for an
object the informers learned of during the collection stays."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.uids import compact_uid
from kuberaven.model import Database
from kuberaven.network import translator as translator_module
from kuberaven.network.backend import DELETE_ORDER, INFRASTRUCTURE, NetworkOptions, Owned, tags
from kuberaven.network.backends import embedded, make_backend
from kuberaven.network.drivers import NetworkBackend
from kuberaven.network.reconcilers.namespaces import NAMESPACES
from kuberaven.network.translator import NetworkTranslator
from kuberaven.testing.namespaces import create_namespace
from tests.helpers import component_running, eventually
from tests.integration.test_network import net_database

__all__ = ["net_database"]  # the fixture, shared with test_network.py

PAGE = 3  # resources per page, both the backend's reads and the translator's comparisons


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "OWNED_PAGE", PAGE)
    monkeypatch.setattr(translator_module, "OWNED_PAGE", PAGE)


def cluster_name() -> str:
    return f"gc-{uuid.uuid4().hex[:8]}"


def planted(backend: NetworkBackend, cluster: str, uids: list[str]) -> dict[str, str]:
    """A network tagged with each uid, as if made for that object: id → uid."""
    return {backend.ensure_network(f"planted-{i}", tags(cluster, uid)): uid for i, uid in enumerate(uids)}


def owned_networks(backend: NetworkBackend, cluster: str) -> dict[str, str | None]:
    return {r.id: r.uid for r in backend.owned(cluster) if r.kind == "network" and r.uid != INFRASTRUCTURE}


def test_owned_reads_every_resource_of_the_cluster_once_in_delete_order(
    net_database: Database, small_pages: None
) -> None:
    backend = make_backend("embedded", net_database)
    cluster, other = cluster_name(), cluster_name()
    made = planted(backend, cluster, [str(uuid.uuid4()) for _ in range(3 * PAGE + 1)])  # pages of 3, 3, 3, 1
    group = backend.ensure_security_group(f"sg-{cluster}", tags(cluster, str(uuid.uuid4())))
    planted(backend, other, [str(uuid.uuid4())])  # another cluster's: not listed
    found = list(backend.owned(cluster))
    assert [r.kind for r in found] == sorted((r.kind for r in found), key=DELETE_ORDER.index)
    assert {(r.id, r.uid) for r in found if r.kind == "network"} == set(made.items())
    assert [r.id for r in found if r.kind == "security_group"] == [group]
    assert len({(r.kind, r.id) for r in found}) == len(found) == len(made) + 1


def test_owned_of_a_cluster_with_nothing_is_empty(net_database: Database, small_pages: None) -> None:
    assert list(make_backend("embedded", net_database).owned(cluster_name())) == []


async def test_garbage_collection_in_pages_removes_exactly_the_leaked(
    kube: KubeClient, net_database: Database, small_pages: None
) -> None:
    backend = make_backend("embedded", net_database)
    cluster = cluster_name()
    names = [f"gc-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    for name in names:
        await create_namespace(kube, name)
    try:
        live = [(await kube.request("GET", f"/api/v1/namespaces/{n}"))["metadata"]["uid"] for n in names]
        gone = [str(uuid.uuid4()) for _ in range(2 * PAGE + 1)]
        # Live and leaked interleaved, so that every page holds some of each and a page boundary falls
        # between a leaked resource and the next.
        made = planted(backend, cluster, [u for pair in zip(gone, [*live, *live], strict=False) for u in pair])
        translator = NetworkTranslator(kube, net_database, cluster, backend, NetworkOptions(), gc_period=3600)
        async with component_running(translator):
            await asyncio.wait_for(translator.collected.wait(), 60)
            left = owned_networks(backend, cluster)
        kept = {i: u for i, u in made.items() if u in live}
        assert {i: u for i, u in left.items() if i in made} == kept
        assert not set(gone) & set(left.values())
    finally:
        for name in names:
            await kube.request("DELETE", f"/api/v1/namespaces/{name}")


class LearnsDuringCollection:
    """The embedded backend, whose owned() lists the planted leaked resources as its first page, then makes a
    namespace and waits until the translator's informer knows it, then lists a resource made for that namespace
    (as one made during the collection would be), then the rest."""

    def __init__(self, backend: NetworkBackend, kube: KubeClient, loop: asyncio.AbstractEventLoop) -> None:
        self.backend, self.kube, self.loop = backend, kube, loop
        self.translator: NetworkTranslator | None = None
        self.leaked: set[str] = set()
        self.late: str | None = None  # the namespace made during the collection
        self.deleted: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def owned(self, cluster: str) -> Iterator[Owned]:
        resources = list(self.backend.owned(cluster))
        yield from (r for r in resources if r.id in self.leaked)
        uid = asyncio.run_coroutine_threadsafe(self._new_namespace(), self.loop).result(60)
        yield Owned("network", "late", "late", uid)
        yield from (r for r in resources if r.id not in self.leaked)

    async def _new_namespace(self) -> str:
        self.late = f"gc-late-{uuid.uuid4().hex[:6]}"
        await create_namespace(self.kube, self.late)
        uid: str = (await self.kube.request("GET", f"/api/v1/namespaces/{self.late}"))["metadata"]["uid"]
        assert self.translator is not None
        informer = self.translator.factory.informer(NAMESPACES)

        def known() -> None:
            assert compact_uid(uid) in set(informer.known_uid_keys())

        await eventually(known, timeout=30)
        return uid

    def delete(self, kind: str, resource: str) -> None:
        self.deleted.append((kind, resource))
        self.backend.delete(kind, resource)


async def test_a_resource_of_an_object_learned_during_the_collection_is_kept(
    kube: KubeClient, net_database: Database, small_pages: None
) -> None:
    real = make_backend("embedded", net_database)
    cluster = cluster_name()
    backend = LearnsDuringCollection(real, kube, asyncio.get_running_loop())
    backend.leaked = set(planted(real, cluster, [str(uuid.uuid4()) for _ in range(PAGE)]))  # one page, all leaked
    # A stand-in with the backend's methods (the ones it does not define are the embedded backend's).
    stand_in: Any = backend
    translator = NetworkTranslator(kube, net_database, cluster, stand_in, NetworkOptions(), gc_period=3600)
    backend.translator = translator
    try:
        async with component_running(translator):
            await asyncio.wait_for(translator.collected.wait(), 90)
        assert ("network", "late") not in backend.deleted  # its object was known once its page was read
        assert {("network", i) for i in backend.leaked} <= set(backend.deleted)
        assert not set(owned_networks(real, cluster)) & backend.leaked
    finally:
        if backend.late is not None:
            await kube.request("DELETE", f"/api/v1/namespaces/{backend.late}")
