"""Backends as drivers (network/drivers/, network/backends/): what a backend can do is decided when it is built, a
port is asked for with one typed request, and the OpenStack backend's drivers share one context.

The OpenStack cases run on a stand-in for openstacksdk's connection (its Neutron answers as the real one does for
these calls); the real Neutron is tests/integration/test_network*.py's.
"""

from __future__ import annotations

import inspect
import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from openstack import exceptions

from kuberaven.model import Database
from kuberaven.network.backend import AddressesExhausted, AddressInUse, tags
from kuberaven.network.backends.embedded import EmbeddedBackend
from kuberaven.network.backends.octavia import OctaviaLoadBalancers
from kuberaven.network.backends.openstack import OpenStackBackend
from kuberaven.network.backends.openstack_context import OpenStackContext, describe
from kuberaven.network.backends.openstack_ports import DEVICE_OWNER, NeutronPorts
from kuberaven.network.drivers import NetworkBackend, pools_ports, reports_port_status, trunks_subports
from kuberaven.network.drivers.ports import Port, PortDriver, PortRequest

NETWORK = Path(__file__).parents[2] / "src" / "kuberaven" / "network"
MTU = 1442  # the network's MTU as the stand-in's Neutron answers it


class Neutron:
    """Neutron's port calls as the drivers make them: ports listed by their fields, a create that may be refused."""

    def __init__(self, ports: list[Any] | None = None, refusal: Exception | None = None) -> None:
        self.existing = list(ports or [])
        self.refusal = refusal
        self.created: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.networks_asked = 0
        self.ids = (f"port-{i}" for i in itertools.count())

    def ports(self, **query: Any) -> list[Any]:
        wanted = {k: v for k, v in query.items() if k in ("network_id", "name")}
        found = [p for p in self.existing if all(getattr(p, k) == v for k, v in wanted.items())]
        if "fixed_ips" in query:
            address = query["fixed_ips"][0].removeprefix("ip_address=")
            found = [p for p in found if any(ip["ip_address"] == address for ip in p.fixed_ips)]
        return found

    def create_port(self, **attrs: Any) -> Any:
        if self.refusal is not None:
            raise self.refusal
        self.created.append(attrs)
        address = attrs["fixed_ips"][0].get("ip_address", "10.9.0.7")
        return neutron_port(next(self.ids), attrs["name"], attrs["description"], address, tags=None)

    def set_tags(self, resource: Any, resource_tags: list[str]) -> None:
        resource.tags = resource_tags

    def delete_port(self, port: Any, ignore_missing: bool = False) -> None:
        self.deleted.append(port.id)

    def get_network(self, network: str) -> Any:
        self.networks_asked += 1
        return SimpleNamespace(id=network, mtu=MTU)


def neutron_port(
    port: str, name: str, description: str, address: str, tags: list[str] | None, device_id: str = ""
) -> Any:
    return SimpleNamespace(
        id=port,
        name=name,
        network_id="net-1",
        description=description,
        fixed_ips=[{"subnet_id": "sub-1", "ip_address": address}],
        mac_address="fa:16:3e:00:00:01",
        device_id=device_id,
        tags=tags,
    )


def connection(neutron: Any, octavia: Any = None) -> Any:
    """openstacksdk's connection as OpenStackContext reads it: its services and its requests session's hooks."""
    return SimpleNamespace(
        session=SimpleNamespace(session=SimpleNamespace(hooks={"response": []})),
        network=neutron,
        load_balancer=octavia or SimpleNamespace(),
        close=lambda: None,
    )


def request(address: str | None, host: str | None = "node-a") -> PortRequest:
    return PortRequest("net-1", "sub-1", "shop/web", "pod-uid", address, ["sg-1"], tags("c", "pod-uid"), host)


def test_what_a_backend_can_do_is_decided_when_it_is_built(database: Database) -> None:
    embedded: NetworkBackend = EmbeddedBackend(database)
    openstack: NetworkBackend = OpenStackBackend(connection(Neutron()))
    assert not pools_ports(embedded) and not trunks_subports(embedded) and not reports_port_status(embedded)
    assert pools_ports(openstack) and trunks_subports(openstack) and reports_port_status(openstack)


def test_no_module_of_the_network_translation_probes_a_backend_for_what_it_can_do() -> None:
    probing = [
        str(path.relative_to(NETWORK)) for path in NETWORK.rglob("*.py") if "callable(getattr(" in path.read_text()
    ]
    assert probing == []


@pytest.mark.parametrize("driver", [PortDriver, EmbeddedBackend, NeutronPorts])
def test_a_port_is_asked_for_with_one_request(driver: Any) -> None:
    assert list(inspect.signature(driver.ensure_port).parameters) == ["self", "request"]


def test_a_neutron_port_is_made_once_with_the_requests_fields_and_found_again_by_its_tags() -> None:
    neutron = Neutron()
    ports = NeutronPorts(OpenStackContext(connection(neutron), "project-1"))
    made = ports.ensure_port(request("10.9.0.5"))
    [attrs] = neutron.created
    assert attrs["fixed_ips"] == [{"subnet_id": "sub-1", "ip_address": "10.9.0.5"}]
    assert (attrs["device_id"], attrs["device_owner"], attrs["binding_host_id"]) == ("pod-uid", DEVICE_OWNER, "node-a")
    assert (attrs["security_group_ids"], attrs["project_id"]) == (["sg-1"], "project-1")
    assert made == Port("port-0", "10.9.0.5", "fa:16:3e:00:00:01", MTU)

    neutron.existing.append(neutron_port(made.id, "shop/web", describe(tags("c", "pod-uid")), "10.9.0.5", None))
    assert ports.ensure_port(request(None)) == made, "found by name and tags, whatever address it has"
    assert len(neutron.created) == 1 and neutron.networks_asked == 1, "the network's MTU asked once"


def test_a_pods_new_address_replaces_its_port() -> None:
    neutron = Neutron([neutron_port("old", "shop/web", describe(tags("c", "pod-uid")), "10.9.0.5", None)])
    ports = NeutronPorts(OpenStackContext(connection(neutron)))
    assert ports.ensure_port(request("10.9.0.6")).address == "10.9.0.6"
    assert neutron.deleted == ["old"]


def test_a_refused_port_names_the_holder_of_its_address_or_says_none_is_left() -> None:
    holder = neutron_port("theirs", "shop/old", "", "10.9.0.5", [], device_id="gone-pod")
    conflict = exceptions.ConflictException("409: IP address 10.9.0.5 already allocated")
    ports = NeutronPorts(OpenStackContext(connection(Neutron([holder], refusal=conflict))))
    with pytest.raises(AddressInUse) as held:
        ports.ensure_port(request("10.9.0.5"))
    assert (held.value.holder, held.value.device_id) == ("theirs", "gone-pod")
    with pytest.raises(AddressesExhausted):
        ports.ensure_port(request(None))
    results = ports.ensure_ports([request("10.9.0.5"), request(None)])
    assert [type(r) for r in results] == [AddressInUse, AddressesExhausted], "each request's error, alone"


class Ports:
    """A ports driver that records what it is asked for."""

    def __init__(self) -> None:
        self.asked: list[PortRequest] = []

    def ensure_port(self, request: PortRequest) -> Port:
        self.asked.append(request)
        return Port("vip-port", request.address or "")

    def ensure_ports(self, requests: list[PortRequest]) -> list[Any]:
        return [self.ensure_port(r) for r in requests]


def test_a_load_balancer_without_a_vip_port_asks_the_ports_driver_for_one() -> None:
    neutron = SimpleNamespace(get_subnet=lambda subnet: SimpleNamespace(id=subnet, network_id="net-services"))
    ports = Ports()
    octavia = OctaviaLoadBalancers(OpenStackContext(connection(neutron)), ports, None, None)
    lb = SimpleNamespace(id="lb-1", name="shop/web", vip_address="10.0.0.20", vip_port_id=None)
    assert octavia._vip_port(lb, "sub-services", tags("c", "svc-uid")) == "vip-port"
    assert ports.asked == [
        PortRequest("net-services", "sub-services", "shop/web:vip", "lb-1", "10.0.0.20", [], tags("c", "svc-uid"))
    ]
