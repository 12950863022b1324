"""A conflict (409) never re-sends a stale value (network/annotations.py).

On a stand-in API server whose first PATCH meets another write of the pod: a value given as is is not sent over
a newer value of its annotation (test_pod_network.py: one given as a function of the pod is computed again).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from kuberaven.kube.errors import Conflict
from kuberaven.network.annotations import annotate
from kuberaven.network.vif import VIF_ANNOTATION, Binding, Vif
from kuberaven.watch.workqueue import Waiting

VIF = Vif("p1", "net-1", "sub-1", "10.64.3.0/24", "10.64.3.1", "fa:16:3e:00:00:01", "10.64.3.5", "node-1", Binding.OVS)


def a_pod(vif: Vif, version: str = "1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "u-web",
            "resourceVersion": version,
            "annotations": {VIF_ANNOTATION: vif.to_json()},
        }
    }


class Server:
    """One pod; a PATCH under an older resourceVersion is a 409. ``meanwhile`` lands just before the first PATCH:
    another write of the pod that the writer's copy has not seen."""

    def __init__(self, pod: dict[str, Any], meanwhile: Callable[[dict[str, Any]], None]) -> None:
        self.pod = pod
        self.meanwhile: Callable[[dict[str, Any]], None] | None = meanwhile
        self.patches = 0

    async def request(self, method: str, path: str, body: Any = None, content_type: str | None = None) -> Any:
        meta = self.pod["metadata"]
        if method == "GET":
            return copy.deepcopy(self.pod)
        assert method == "PATCH"
        self.patches += 1
        if self.meanwhile is not None:
            self.meanwhile(meta)
            meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
            self.meanwhile = None
        if body["metadata"]["resourceVersion"] != meta["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        for key, value in body["metadata"].get("annotations", {}).items():
            if value is None:
                meta["annotations"].pop(key, None)
            else:
                meta["annotations"][key] = value
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        return copy.deepcopy(self.pod)

    def vif(self) -> Vif:
        return Vif.from_json(self.pod["metadata"]["annotations"][VIF_ANNOTATION])


async def test_a_409_during_a_status_change_leaves_the_newest_vif() -> None:
    """The port's status, written from the pod as it was read, meets the pod's new VIF (another port): the stale
    VIF is not sent over it."""
    newest = dataclasses.replace(VIF, port="p2", mac="fa:16:3e:00:00:02", ip="10.64.3.6", status="DOWN")
    read = a_pod(dataclasses.replace(VIF, status="DOWN"))
    server = Server(copy.deepcopy(read), lambda meta: meta["annotations"].update({VIF_ANNOTATION: newest.to_json()}))
    active = dataclasses.replace(VIF, status="ACTIVE").to_json()  # computed from the VIF read
    with contextlib.suppress(Waiting):  # its writer's reconcile computes it again, from the newest state
        await annotate(server, "Pod", read, VIF_ANNOTATION, active)  # type: ignore[arg-type]  # the stand-in
    assert server.vif() == newest


async def test_a_value_unrelated_to_what_changed_is_sent_again_under_the_new_version() -> None:
    """A conflict with a change elsewhere in the pod (its status, its labels) writes the value all the same."""
    read = a_pod(dataclasses.replace(VIF, status="DOWN"))
    server = Server(copy.deepcopy(read), lambda meta: meta.setdefault("labels", {}).update({"app": "web"}))
    active = dataclasses.replace(VIF, status="ACTIVE").to_json()
    written = await annotate(server, "Pod", read, VIF_ANNOTATION, active)  # type: ignore[arg-type]  # the stand-in
    assert written is not None and server.vif().active and server.patches == 2
