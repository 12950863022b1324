"""Discovery asks the API server once per group/version, however many resolve it at once (kube/resources.py).

The informers start together at the daemon's start: seven of them resolve v1 at the same moment. The client
here is a stand-in answering discovery documents from a table (the unit under test is the sharing); the real
server's answers are read by the integration tests of every informer.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.kube.resources import Discovery, UnknownKind
from kuberaven.network.endpointslices import members_target

CORE = {
    "resources": [
        {"name": "pods", "kind": "Pod", "namespaced": True},
        {"name": "pods/status", "kind": "Pod", "namespaced": True},
        {"name": "services", "kind": "Service", "namespaced": True},
        {"name": "namespaces", "kind": "Namespace", "namespaced": False},
    ]
}


SLICES_V1BETA1 = {"resources": [{"name": "endpointslices", "kind": "EndpointSlice", "namespaced": True}]}
SERVED = {"/api/v1": CORE, "/apis/discovery.k8s.io/v1beta1": SLICES_V1BETA1}  # as Kubernetes 1.20 serves


class Answers:
    """Answers GET of a discovery path after ``release`` is set; counts the requests."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.release = asyncio.Event()

    async def request(self, method: str, path: str, **_: Any) -> Any:
        self.requests.append(path)
        await self.release.wait()
        if path in SERVED:
            return SERVED[path]
        raise NotFound(404, "NotFound", f"{path} not found")


def discovery(answers: Answers) -> Discovery:
    return Discovery(cast(KubeClient, answers))


async def test_resolving_at_once_asks_once() -> None:
    answers = Answers()
    found = discovery(answers)
    waiting = [asyncio.create_task(found.resolve("v1", kind)) for kind in ("Pod", "Service", "Namespace", "Pod")]
    await asyncio.sleep(0)
    answers.release.set()
    resources = await asyncio.gather(*waiting)
    assert [r.plural for r in resources] == ["pods", "services", "namespaces", "pods"]
    assert answers.requests == ["/api/v1"]
    assert (await found.resolve("v1", "Service")).namespaced and answers.requests == ["/api/v1"]  # cached


async def test_a_failure_reaches_every_waiter_and_is_asked_again() -> None:
    answers = Answers()
    found = discovery(answers)
    waiting = [asyncio.create_task(found.resolve("example.com/v1", "Thing")) for _ in range(3)]
    await asyncio.sleep(0)
    answers.release.set()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, UnknownKind) and "does not serve example.com/v1" in str(r) for r in results), results
    assert answers.requests == ["/apis/example.com/v1"]
    with pytest.raises(UnknownKind):  # not cached: a CRD installed later is found
        await found.resolve("example.com/v1", "Thing")
    assert len(answers.requests) == 2


async def test_one_waiter_cancelled_leaves_the_others_their_answer() -> None:
    answers = Answers()
    found = discovery(answers)
    first = asyncio.create_task(found.resolve("v1", "Pod"))
    second = asyncio.create_task(found.resolve("v1", "Service"))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    answers.release.set()
    assert (await second).plural == "services"
    assert first.cancelled() and answers.requests == ["/api/v1"]


async def test_the_members_source_is_found_with_the_informers_discovery() -> None:
    """The daemon hands members_target() its informers' discovery: the slices' informer then asks nothing."""
    answers = Answers()
    answers.release.set()
    found = discovery(answers)
    target = await members_target(cast(KubeClient, answers), found)
    assert (target.api_version, target.kind) == ("discovery.k8s.io/v1beta1", "EndpointSlice")
    asked = list(answers.requests)
    assert asked == ["/apis/discovery.k8s.io/v1", "/apis/discovery.k8s.io/v1beta1"]
    assert (await found.resolve(target.api_version, target.kind)).plural == "endpointslices"
    assert answers.requests == asked
