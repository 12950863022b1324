"""The CNI specification's rules as kuberaven-cni applies them (cni/spec.py), from plain data."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kuberaven.cni.spec import (
    IFNAME_MAX,
    CniError,
    Code,
    bridge_name,
    host_ifname,
    invocation,
    parse_config,
    result,
    version,
)
from kuberaven.network.vif import Vif

CONFIG = json.dumps({"cniVersion": "1.0.0", "name": "kuberaven", "type": "kuberaven-cni", "kubeconfig": "/k"})
ENV = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "ctr",
    "CNI_NETNS": "/var/run/netns/x",
    "CNI_IFNAME": "eth0",
    "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-1;K8S_POD_UID=u-1",
}


def refused(code: Code, call: Any, *args: Any) -> str:
    with pytest.raises(CniError) as caught:
        call(*args)
    assert caught.value.code == code, caught.value.msg
    error = json.loads(caught.value.to_json())
    assert (error["cniVersion"], error["code"]) == ("1.0.0", int(code))
    return caught.value.msg


def test_an_add_names_the_pod_the_sandbox_and_the_bound() -> None:
    call = invocation(ENV, parse_config(CONFIG))
    assert (call.command, call.container_id, call.netns, call.ifname) == ("ADD", "ctr", "/var/run/netns/x", "eth0")
    assert (call.pod_namespace, call.pod_name, call.pod_uid, call.kubeconfig) == ("shop", "web-1", "u-1", "/k")
    assert call.timeout == 30.0
    # OVS: ovs-vsctl's own database, br-int, the plugin's own netns, a minute for the port to be ACTIVE.
    assert (call.ovsdb, call.ovs_bridge, call.node_netns, call.active_timeout) == (None, "br-int", None, 60.0)


def test_the_node_of_an_ovs_chassis_in_a_netns_of_its_own() -> None:
    config = {
        **json.loads(CONFIG),
        "ovsdb": "unix:/x/db.sock",
        "ovsBridge": "br-pods",
        "nodeNetns": "/run/netns/n",
        "activeTimeout": 2.5,
    }
    call = invocation(ENV, parse_config(json.dumps(config)))
    assert (call.ovsdb, call.ovs_bridge, call.node_netns, call.active_timeout) == (
        "unix:/x/db.sock",
        "br-pods",
        "/run/netns/n",
        2.5,
    )


@pytest.mark.parametrize(
    ("config", "code", "problem"),
    [
        ("{", Code.DECODE_FAILURE, "not JSON"),
        ("[1]", Code.DECODE_FAILURE, "not a JSON object"),
        ('{"cniVersion": "0.4.0", "name": "n"}', Code.INCOMPATIBLE_VERSION, "'0.4.0' is not supported"),
        ('{"cniVersion": "1.0.0"}', Code.INVALID_CONFIG, "has no name"),
        ('{"cniVersion": "1.0.0", "name": "n", "annotationTimeout": 0}', Code.INVALID_CONFIG, "annotationTimeout"),
        ('{"cniVersion": "1.0.0", "name": "n", "annotationTimeout": "5"}', Code.INVALID_CONFIG, "annotationTimeout"),
        ('{"cniVersion": "1.0.0", "name": "n", "activeTimeout": -1}', Code.INVALID_CONFIG, "activeTimeout must be"),
        ('{"cniVersion": "1.0.0", "name": "n", "activeTimeout": true}', Code.INVALID_CONFIG, "activeTimeout must be"),
        ('{"cniVersion": "1.0.0", "name": "n", "ovsdb": ""}', Code.INVALID_CONFIG, "ovsdb must be a non-empty"),
        ('{"cniVersion": "1.0.0", "name": "n", "nodeNetns": 3}', Code.INVALID_CONFIG, "nodeNetns must be"),
        ('{"cniVersion": "1.0.0", "name": "n", "ovsBridge": null}', Code.INVALID_CONFIG, "ovsBridge must be"),
    ],
)
def test_a_bad_network_config_gets_the_specs_code(config: str, code: Code, problem: str) -> None:
    assert problem in refused(code, parse_config, config)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"CNI_COMMAND": "FROB"}, "'FROB' is not ADD"),
        ({"CNI_NETNS": ""}, "ADD needs CNI_NETNS"),
        ({"CNI_ARGS": "IgnoreUnknown=1"}, "lacks K8S_POD_NAMESPACE"),
        ({"CNI_ARGS": "K8S_POD_NAME"}, "not K=V"),
        ({"CNI_IFNAME": "x" * (IFNAME_MAX + 1)}, "not a valid interface name"),
    ],
)
def test_a_bad_environment_is_invalid_environment(change: dict[str, str], problem: str) -> None:
    assert problem in refused(Code.INVALID_ENVIRONMENT, invocation, {**ENV, **change}, parse_config(CONFIG))


def test_del_needs_neither_the_sandbox_nor_the_pod() -> None:
    call = invocation({"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "ctr", "CNI_IFNAME": "eth0"}, parse_config(CONFIG))
    assert call.netns is None and call.pod_name is None


def test_names_fit_linux_and_are_found_again() -> None:
    assert len(host_ifname("c" * 64, "eth0")) <= IFNAME_MAX and len(bridge_name("12345")) <= IFNAME_MAX
    assert host_ifname("ctr", "eth0") == host_ifname("ctr", "eth0") != host_ifname("ctr", "eth1")
    assert bridge_name("1") != bridge_name("2")


def test_the_add_result_has_both_interfaces_the_address_and_the_default_route() -> None:
    vif = Vif(
        port="7",
        network="2",
        subnet="3",
        cidr="10.64.0.0/24",
        gateway="10.64.0.1",
        mac="fa:16:3e:00:00:07",
        ip="10.64.0.5",
        node="n",
    )
    answer = result(vif, invocation(ENV, parse_config(CONFIG)), "krvabc", "aa:bb:cc:dd:ee:ff")
    assert answer["cniVersion"] == "1.0.0"
    assert answer["interfaces"][1] == {"name": "eth0", "mac": "fa:16:3e:00:00:07", "sandbox": "/var/run/netns/x"}
    assert answer["ips"] == [{"address": "10.64.0.5/24", "gateway": "10.64.0.1", "interface": 1}]
    assert answer["routes"] == [{"dst": "0.0.0.0/0", "gw": "10.64.0.1"}]
    assert version() == {"cniVersion": "1.0.0", "supportedVersions": ["1.0.0"]}
