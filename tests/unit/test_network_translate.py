"""What Kubernetes objects become in the network model (network/rules/translate.py), from recorded objects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kuberaven.network.backend import CNI_KUBERAVEN, NetworkOptions
from kuberaven.network.backends.embedded_ports import port_of
from kuberaven.network.rules.services import service_load_balancer
from kuberaven.network.rules.translate import (
    PortAsk,
    pod_port,
    pod_vif,
    port_ask,
    translated_namespace,
)
from kuberaven.network.vif import VIF_VERSION, Binding, Vif, VifError

OTHER_CNI, OUR_CNI = NetworkOptions(), NetworkOptions(cni=CNI_KUBERAVEN)


def pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "shop", "name": "web-1", "uid": "u-1"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running", "podIP": "10.128.0.7", **status},
    }


def service(kind: str = "ClusterIP", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "shop", "name": "web", "uid": "s-1"},
        "spec": {
            "type": kind,
            "clusterIP": "10.0.0.20",
            "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}],
            **spec,
        },
    }


ENDPOINTS = {
    "metadata": {"namespace": "shop", "name": "web"},
    "subsets": [
        {
            "addresses": [
                {"ip": "10.128.0.7", "targetRef": {"kind": "Pod", "name": "web-1"}},
                {"ip": "10.129.0.3", "targetRef": {"kind": "Pod", "name": "web-2"}},
            ],
            "notReadyAddresses": [{"ip": "10.128.0.9", "targetRef": {"kind": "Pod", "name": "web-3"}}],
            "ports": [
                {"name": "http", "port": 8080, "protocol": "TCP"},
                {"name": "dns", "port": 5353, "protocol": "UDP"},
            ],
        }
    ],
}


def test_system_namespaces_are_skipped_unless_asked_for() -> None:
    assert translated_namespace("shop", NetworkOptions()) and translated_namespace("default", NetworkOptions())
    assert not translated_namespace("kube-system", NetworkOptions())
    assert translated_namespace("kube-system", NetworkOptions(include_system_namespaces=True))


def test_a_pod_port_has_its_ip_and_uid_and_waits_for_an_ip() -> None:
    port = pod_port(pod(), OTHER_CNI)
    assert port is not None and (port.name, port.address, port.device_id) == ("shop/web-1", "10.128.0.7", "u-1")
    assert pod_port(pod(podIP=None), OTHER_CNI) is None
    assert pod_port(pod(phase="Succeeded"), OTHER_CNI) is None
    host_network = pod()
    host_network["spec"]["hostNetwork"] = True
    assert pod_port(host_network, OTHER_CNI) is None


def scheduled(**spec: Any) -> dict[str, Any]:
    """A pod the scheduler bound to a node, that no CNI has wired yet."""
    made = pod(podIP=None, phase="Pending")
    made["spec"].update({"nodeName": "node-1", **spec})
    return made


def test_with_our_cni_a_port_is_due_once_scheduled_before_the_pod_has_an_ip() -> None:
    port = pod_port(scheduled(), OUR_CNI)
    assert port is not None and (port.address, port.node) == (None, "node-1")
    # Not yet scheduled, hostNetwork, or another CNI: no port before the IP.
    assert pod_port(pod(podIP=None, phase="Pending"), OUR_CNI) is None
    assert pod_port(scheduled(hostNetwork=True), OUR_CNI) is None
    assert pod_port(scheduled(), OTHER_CNI) is None
    # Once our CNI gave the pod the port's IP: the port stays due.
    wired = scheduled()
    wired["status"]["podIP"] = "10.64.0.5"
    assert pod_port(wired, OUR_CNI) is not None
    being_deleted = scheduled()
    being_deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert pod_port(being_deleted, OUR_CNI) is None


STATE = {
    "port": "7",
    "address": "10.64.0.5",
    "pod_ip": None,
    "mac": "fa:16:3e:00:00:07",
    "mtu": 1500,
    "node": "node-1",
    "network": "2",
    "subnet": "3",
    "cidr": "10.64.0.0/24",
    "gateway": "10.64.0.1",
    "security_groups": ["4"],
}


def test_port_ask_follows_another_cnis_ip_in_cluster_mode_and_keeps_the_ipams_otherwise() -> None:
    cluster, namespace = NetworkOptions(), NetworkOptions(subnet_mode="namespace")
    assert port_ask(None, "10.128.0.7", cluster) == PortAsk(True, "10.128.0.7")
    assert port_ask(None, None, cluster).address is None  # our CNI: the IPAM picks, the pod gets it
    assert port_ask(None, "10.128.0.7", namespace).address is None
    assert not port_ask(STATE, None, cluster).needed
    assert not port_ask(STATE, "10.64.0.5", cluster).needed  # the pod ended with the port's IP
    assert port_ask(STATE, "10.128.0.9", cluster).address == "10.128.0.9"  # another CNI chose: the port follows
    assert not port_ask(STATE, "10.128.0.9", namespace).needed
    old = {k: v for k, v in STATE.items() if k != "mac"}  # a row from before the VIF: asked again (same port)
    assert port_ask(old, "10.64.0.5", cluster).needed


def test_a_pod_vif_from_its_state_reads_back_the_same() -> None:
    vif = pod_vif(STATE, Binding.BRIDGE)
    assert (vif.ip, vif.mac, vif.prefix_length, vif.gateway, vif.node) == (
        "10.64.0.5",
        "fa:16:3e:00:00:07",
        24,
        "10.64.0.1",
        "node-1",
    )
    assert Vif.from_json(vif.to_json()) == vif
    assert pod_vif({**STATE, "gateway": None}, Binding.BRIDGE).gateway == "10.64.0.1"  # the subnet's first host


@pytest.mark.parametrize(
    ("binding", "recorded", "status"),
    [
        (Binding.BRIDGE, None, "ACTIVE"),  # nothing binds a bridge port: ready at once
        (Binding.OVS, None, "DOWN"),  # Neutron's port waits for the node's OVN to bind it
        (Binding.OVS, "ACTIVE", "ACTIVE"),  # as activation.py recorded it
        (Binding.OVS, "ERROR", "ERROR"),
    ],
)
def test_a_pod_vifs_status_is_the_recorded_one_else_what_its_binding_starts_with(
    binding: str, recorded: str | None, status: str
) -> None:
    state = {**STATE, **({"status": recorded} if recorded else {})}
    vif = pod_vif(state, binding)
    assert (vif.status, vif.active) == (status, status == "ACTIVE")
    assert Vif.from_json(vif.to_json()).status == status


def test_a_vif_written_without_a_status_counts_as_active() -> None:
    """An older kuberaven wrote no status: its pods were wired without waiting."""
    data = {k: v for k, v in json.loads(pod_vif(STATE, Binding.OVS).to_json()).items() if k != "status"}
    assert Vif.from_json(json.dumps(data)).active


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "is not JSON"),
        ("[]", "is not a JSON object"),
        ('{"version": 99}', "version 99 is not"),
        (f'{{"version": {VIF_VERSION}, "ip": "10.64.0.5"}}', "lacks port, network"),
    ],
)
def test_a_bad_vif_annotation_is_refused_with_the_reason(text: str, problem: str) -> None:
    with pytest.raises(VifError, match=problem):
        Vif.from_json(text)


def test_a_vif_whose_ip_is_outside_its_subnet_is_refused() -> None:
    vif = pod_vif({**STATE, "address": "10.65.0.5"}, Binding.BRIDGE)
    with pytest.raises(VifError, match=r"not in 10\.64\.0\.0/24"):
        Vif.from_json(vif.to_json())


@pytest.mark.parametrize(
    ("nested", "problem"),
    [
        ({}, "binding vlan needs vlan_id"),
        ({"vlan_id": 0, "trunk": "t", "parent_mac": "fa:16:3e:00:00:01"}, "vlan_id \\(1-4094\\)"),
        ({"vlan_id": 4095, "trunk": "t", "parent_mac": "fa:16:3e:00:00:01"}, "vlan_id \\(1-4094\\)"),
        ({"vlan_id": 7, "trunk": "t"}, "parent_mac"),
    ],
)
def test_a_nested_vif_without_its_vlan_trunk_and_parent_is_refused(nested: dict[str, object], problem: str) -> None:
    data = {**json.loads(pod_vif(STATE, Binding.OVS).to_json()), "binding": Binding.VLAN, **nested}
    with pytest.raises(VifError, match=problem):
        Vif.from_json(json.dumps(data))
    whole = {**data, "vlan_id": 7, "trunk": "t", "parent_mac": "fa:16:3e:00:00:01"}
    assert Vif.from_json(json.dumps(whole)).vlan_id == 7


def test_every_service_port_becomes_a_listener_with_the_ready_endpoints_as_members() -> None:
    spec = service_load_balancer(service(), ENDPOINTS)
    assert spec is not None and spec.vip_address == "10.0.0.20" and not spec.floating_ip
    http, dns = spec.listeners
    assert (http.name, http.protocol, http.port) == ("shop/web:TCP:80", "TCP", 80)
    assert (dns.name, dns.protocol, dns.port) == ("shop/web:UDP:53", "UDP", 53)
    # Ready addresses only, on the endpoint's (target) port, named namespace/pod:port.
    assert [(m.name, m.address, m.port) for m in http.members] == [
        ("shop/web-1:8080", "10.128.0.7", 8080),
        ("shop/web-2:8080", "10.129.0.3", 8080),
    ]
    assert {m.port for m in dns.members} == {5353}


def test_skipped_services_and_load_balancer_ip() -> None:
    assert service_load_balancer(service(clusterIP="None"), ENDPOINTS) is None  # headless
    node_port = service_load_balancer(service("NodePort"), ENDPOINTS)  # its cluster IP's, without a floating IP
    assert node_port is not None and not node_port.floating_ip
    api = service()
    api["metadata"] |= {"namespace": "default", "name": "kubernetes"}
    assert service_load_balancer(api, None) is None
    lb = service_load_balancer(service("LoadBalancer", loadBalancerIP="172.24.4.77"), None)
    assert lb is not None and lb.floating_ip and lb.floating_address == "172.24.4.77"
    assert all(listener.members == () for listener in lb.listeners)


def test_the_digest_changes_with_the_members_only() -> None:
    base = service_load_balancer(service(), ENDPOINTS)
    again = service_load_balancer(service(), ENDPOINTS)
    fewer = service_load_balancer(service(), {**ENDPOINTS, "subsets": []})
    assert base is not None and again is not None and fewer is not None
    assert base.digest() == again.digest() != fewer.digest()


def test_an_embedded_ports_mac_follows_from_its_id_like_neutrons() -> None:
    macs = {port_of(i, "10.0.0.2").mac for i in (1, 2, 255, 256, 2**24 - 1)}
    assert len(macs) == 5 and all(mac.startswith("fa:16:3e:") and len(mac) == 17 for mac in macs)
    assert port_of(7, "10.0.0.2").mac == "fa:16:3e:00:00:07"
