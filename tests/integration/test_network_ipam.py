"""The embedded backend's IPAM on real SQLite and PostgreSQL: no double allocation, clear exhaustion."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from kuberaven.model import Database
from kuberaven.network.backend import AddressesExhausted, AddressInUse, NetworkOptions, tags
from kuberaven.network.backends.embedded import EmbeddedBackend
from kuberaven.network.drivers.ports import Port, PortRequest


def test_concurrent_ports_never_get_the_same_address_and_a_full_subnet_says_so(database: Database) -> None:
    backend = EmbeddedBackend(database)
    network = backend.ensure_network("shop", tags("c1", "ns-uid"))
    subnet = backend.ensure_subnet(network, "shop", tags("c1", "ns-uid"), cidr="10.9.0.0/27")  # 30 hosts, 1 gateway

    def port(i: int) -> str:
        request = PortRequest(network, subnet.id, f"shop/p{i}", f"pod-{i}", None, [], tags("c1", f"pod-{i}"))
        return backend.ensure_port(request).address

    with ThreadPoolExecutor(8) as pool:
        addresses = list(pool.map(port, range(29)))
    assert len(set(addresses)) == 29 and "10.9.0.1" not in addresses  # the gateway is never handed out
    with pytest.raises(AddressesExhausted, match=r"subnet shop \(10.9.0.0/27\) has no free address"):
        port(29)
    # Asking again for a port that exists returns it; nothing new is allocated.
    assert port(3) == addresses[3]
    # A fixed address held by another port names the holder and its pod.
    with pytest.raises(AddressInUse, match=r"address 10.9.0.2 is in use by port \d+ \(device pod-\d+\)"):
        backend.ensure_port(PortRequest(network, subnet.id, "shop/other", "pod-x", "10.9.0.2", [], tags("c1", "pod-x")))
    # Deleting a port frees its address for the next one.
    holder = next(r for r in backend.owned("c1") if r.kind == "port" and r.name == "shop/p0")
    backend.delete("port", holder.id)
    assert port(100) == addresses[0]


def test_namespace_subnets_come_from_the_pool_and_floating_ips_from_the_external_range(database: Database) -> None:
    backend = EmbeddedBackend(database)
    options = NetworkOptions(subnet_mode="namespace", namespace_pool="10.64.0.0/22", external_cidr="172.24.4.0/30")
    infra = backend.ensure_infrastructure("c2", options)
    assert infra.subnet_pool is not None
    cidrs = []
    for name in ("a", "b", "c", "d"):
        network = backend.ensure_network(name, tags("c2", name))
        cidrs.append(backend.ensure_subnet(network, name, tags("c2", name), pool=infra.subnet_pool, prefix=24).cidr)
    assert cidrs == ["10.64.0.0/24", "10.64.1.0/24", "10.64.2.0/24", "10.64.3.0/24"]
    network = backend.ensure_network("e", tags("c2", "e"))
    with pytest.raises(AddressesExhausted, match=r"subnet pool kuberaven-namespaces \(10.64.0.0/22\)"):
        backend.ensure_subnet(network, "e", tags("c2", "e"), pool=infra.subnet_pool, prefix=24)

    lb = backend.ensure_load_balancer("shop/web", infra.service_subnet, "10.0.0.20", tags("c2", "svc"))
    fip = backend.ensure_floating_ip(infra.external_network, lb.vip_port, None, tags("c2", "svc"))
    assert fip.address == "172.24.4.2"  # .1 is the external gateway; /30 has one address left
    other = backend.ensure_load_balancer("shop/api", infra.service_subnet, "10.0.0.21", tags("c2", "svc2"))
    with pytest.raises(AddressesExhausted, match="kuberaven-external"):
        backend.ensure_floating_ip(infra.external_network, other.vip_port, None, tags("c2", "svc2"))
    # Released (keep-floatingip), it is attached to nothing and no other floating IP gets its address; asked
    # for by address (loadBalancerIP), it is taken again.
    backend.release_floating_ip(fip.id)
    with pytest.raises(AddressesExhausted, match="kuberaven-external"):
        backend.ensure_floating_ip(infra.external_network, other.vip_port, None, tags("c2", "svc2"))
    taken = backend.ensure_floating_ip(infra.external_network, other.vip_port, fip.address, tags("c2", "svc2"))
    assert taken == fip
    assert [r.uid for r in backend.owned("c2") if r.kind == "floating_ip"] == ["svc2"]


def test_many_ports_at_once_follow_the_same_rules_as_one(database: Database) -> None:
    """ensure_ports(): the bulk path of a cold start; every case ensure_port() knows, answered per request."""
    backend = EmbeddedBackend(database)
    network = backend.ensure_network("bulk", tags("c3", "ns-uid"))
    subnet = backend.ensure_subnet(network, "bulk", tags("c3", "ns-uid"), cidr="10.7.0.0/16")

    def request(i: int, address: str | None, uid: str | None = None) -> PortRequest:
        uid = uid or f"pod-{i}"
        return PortRequest(network, subnet.id, f"bulk/p{i}", uid, address, ["sg"], tags("c3", uid))

    first = backend.ensure_ports([request(i, f"10.7.{i // 200}.{i % 200 + 2}") for i in range(900)])
    assert all(isinstance(p, Port) for p in first) and len({p.id for p in first}) == 900  # type: ignore[union-attr]
    assert [p.address for p in first[:2]] == ["10.7.0.2", "10.7.0.3"]  # type: ignore[union-attr]
    # The same requests again: the same ports, nothing new.
    assert backend.ensure_ports([request(i, f"10.7.{i // 200}.{i % 200 + 2}") for i in range(900)]) == first
    assert len([r for r in backend.owned("c3") if r.kind == "port"]) == 900
    mixed = backend.ensure_ports(
        [
            request(0, "10.7.9.9"),  # the pod's IP changed: a new port, the old address freed
            request(1000, "10.7.0.3"),  # held by p1: that request alone fails, naming the holder
            request(1001, None),  # no fixed address: the IPAM picks the lowest free one
            request(1002, "10.7.8.8"),  # a new pod with a free address
        ]
    )
    assert isinstance(mixed[0], Port) and mixed[0].address == "10.7.9.9" and mixed[0].id != first[0].id  # type: ignore[union-attr]
    assert isinstance(mixed[1], AddressInUse) and mixed[1].device_id == "pod-1"
    assert isinstance(mixed[2], Port) and mixed[2].address == "10.7.0.2"  # p0's old address, free again
    assert isinstance(mixed[3], Port) and mixed[3].address == "10.7.8.8"
