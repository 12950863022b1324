"""Which Services answer, on real packets through Octavia's ovn provider: NodePort Services at their cluster IP
through type changes, and Services labelled for another proxy or headless, as Kubernetes' own e2e cases
(test/e2e/network/service.go, 1.20) check them with kube-proxy. Node ports on the nodes' addresses are not
kuberaven's (docs/network.md, "Node ports"): the steps of those cases that reach one are left out, and said so;
kube-proxy beside kuberaven serves them, test_node_ports.py's.

Against the package's data path (conftest.py here, tests/datapath.py); every wait is for an outcome.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.network.rules.services import HEADLESS_LABEL, SERVICE_PROXY_NAME_LABEL
from tests.datapath import SERVICES_GROUP, Pod, Sandboxes, connect, serving
from tests.helpers import eventually
from tests.integration.datapath.services.test_kube_proxy import answered_by, create, patch, service

pytestmark = [pytest.mark.xdist_group(SERVICES_GROUP), pytest.mark.timeout(900)]

WAIT = 120  # seconds an outcome may take to reach OVN (a few on a loaded 2-core machine)
SERVE_HOSTNAME = 9376  # the port of upstream's serve-hostname pods
PORT = {"port": 80, "targetPort": SERVE_HOSTNAME}
DOWN_TRIES = 3  # connections that must all fail for a Service to count as down (upstream tries until one fails)
DOWN_TIMEOUT = 1.0


async def down(client: Pod, address: str, port: int = 80) -> None:
    """No connection to ``address`` is made: nothing serves it (upstream's verifyServeHostnameServiceDown)."""
    for _ in range(DOWN_TRIES):
        answer = await connect(client.sandbox, address, port, DOWN_TIMEOUT)
        assert answer is None, f"{address}:{port} answered {answer!r}"


async def serve_hostname(
    boxes: Sandboxes, namespace: str, app: str, count: int, stack: contextlib.AsyncExitStack
) -> set[str]:
    """``count`` pods labelled app=``app`` answering with their names on SERVE_HOSTNAME: their names."""
    names = set()
    for index in range(count):
        pod = await boxes.pod(namespace, f"{app}-{index}", labels={"app": app})
        await stack.enter_async_context(serving(pod.sandbox, SERVE_HOSTNAME, pod.name))
        names.add(pod.name)
    return names


async def test_services_labelled_for_another_proxy_or_headless_do_not_answer_until_the_label_goes(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """Upstream "should implement service.kubernetes.io/service-proxy-name" and "should implement
    service.kubernetes.io/headless": a Service created with the label never answers; one created without it
    answers with each of its pods, stops answering once labelled and answers again once the label goes (each
    label in turn on the same Service, two pods each rather than three)."""
    ns = dp_namespace
    client = await boxes.pod(ns, "client")
    async with contextlib.AsyncExitStack() as stack:
        toggled_pods = await serve_hostname(boxes, ns, "toggled", 2, stack)
        await serve_hostname(boxes, ns, "disabled", 1, stack)
        disabled: dict[str, Any] = {}
        for name, label in (
            ("proxy-disabled", {SERVICE_PROXY_NAME_LABEL: "foo-bar"}),
            ("headless", {HEADLESS_LABEL: ""}),
        ):
            body = service(name, [PORT], {"app": "disabled"})
            body["metadata"]["labels"] = label
            disabled[name] = (await create(dp_kube, ns, "services", body))["spec"]["clusterIP"]
        toggled = (await create(dp_kube, ns, "services", service("toggled", [PORT], {"app": "toggled"})))["spec"]
        vip = toggled["clusterIP"]
        await eventually(lambda: answered_by(client.sandbox, vip, 80, toggled_pods), timeout=WAIT)
        for address in disabled.values():
            await down(client, address)
        for label in ({SERVICE_PROXY_NAME_LABEL: "foo-bar"}, {HEADLESS_LABEL: ""}):
            await patch(dp_kube, ns, "toggled", {"metadata": {"labels": label}})
            await eventually(lambda: down(client, vip), timeout=WAIT)
            await patch(dp_kube, ns, "toggled", {"metadata": {"labels": dict.fromkeys(label)}})
            await eventually(lambda: answered_by(client.sandbox, vip, 80, toggled_pods), timeout=WAIT)
        for address in disabled.values():  # still not up
            await down(client, address)


async def test_a_node_port_service_answers_at_its_cluster_ip_through_type_changes(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """Upstream "should be able to create a functioning NodePort service", "should be able to change the type
    from ExternalName to NodePort", "… from NodePort to ExternalName", "… from ClusterIP to ExternalName" and
    "… from ExternalName to ClusterIP"'s reachability checks at the cluster IP (checkServiceReachability; its
    node port steps do not apply): a NodePort Service answers with each of its pods at its cluster IP; as
    ExternalName it has none; back to NodePort it answers at its new one, as ClusterIP at the same; as
    ExternalName again it has none, and as ClusterIP again it answers at its new one."""
    ns = dp_namespace
    client = await boxes.pod(ns, "client")
    async with contextlib.AsyncExitStack() as stack:
        names = await serve_hostname(boxes, ns, "np", 2, stack)
        made = await create(dp_kube, ns, "services", service("np", [PORT], {"app": "np"}, type="NodePort"))
        vip = made["spec"]["clusterIP"]
        assert made["spec"]["ports"][0]["nodePort"], made["spec"]
        await eventually(lambda: answered_by(client.sandbox, vip, 80, names), timeout=WAIT)
        # As upstream's jig changes it: the API server drops the fields the new type has no use for.
        await patch(dp_kube, ns, "np", {"spec": {"type": "ExternalName", "externalName": "np.example.com"}})
        await eventually(lambda: down(client, vip), timeout=WAIT)
        back = {"type": "NodePort", "externalName": None}
        vip = (await patch(dp_kube, ns, "np", {"spec": back}))["spec"]["clusterIP"]
        await eventually(lambda: answered_by(client.sandbox, vip, 80, names), timeout=WAIT)
        await patch(dp_kube, ns, "np", {"spec": {"type": "ClusterIP", "ports": [{**PORT, "nodePort": None}]}})
        found = await dp_kube.request("GET", f"/api/v1/namespaces/{ns}/services/np")
        assert found["spec"]["clusterIP"] == vip and "nodePort" not in found["spec"]["ports"][0], found["spec"]
        await eventually(lambda: answered_by(client.sandbox, vip, 80, names), timeout=WAIT)
        await patch(dp_kube, ns, "np", {"spec": {"type": "ExternalName", "externalName": "np.example.com"}})
        await eventually(lambda: down(client, vip), timeout=WAIT)
        again = await patch(dp_kube, ns, "np", {"spec": {"type": "ClusterIP", "externalName": None}})
        await eventually(lambda: answered_by(client.sandbox, again["spec"]["clusterIP"], 80, names), timeout=WAIT)
