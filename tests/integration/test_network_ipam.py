"""The embedded backend's IPAM on real SQLite and PostgreSQL: no double allocation, clear exhaustion."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from kuberaven.model import Database
from kuberaven.network.backend import AddressesExhausted, AddressInUse, NetworkOptions, tags
from kuberaven.network.backends.embedded import EmbeddedBackend


def test_concurrent_ports_never_get_the_same_address_and_a_full_subnet_says_so(database: Database) -> None:
    backend = EmbeddedBackend(database)
    network = backend.ensure_network("shop", tags("c1", "ns-uid"))
    subnet = backend.ensure_subnet(network, "shop", tags("c1", "ns-uid"), cidr="10.9.0.0/27")  # 30 hosts, 1 gateway

    def port(i: int) -> str:
        return backend.ensure_port(
            network, subnet.id, f"shop/p{i}", f"pod-{i}", None, [], tags("c1", f"pod-{i}")
        ).address

    with ThreadPoolExecutor(8) as pool:
        addresses = list(pool.map(port, range(29)))
    assert len(set(addresses)) == 29 and "10.9.0.1" not in addresses  # the gateway is never handed out
    with pytest.raises(AddressesExhausted, match=r"subnet shop \(10.9.0.0/27\) has no free address"):
        port(29)
    # Asking again for a port that exists returns it; nothing new is allocated.
    assert port(3) == addresses[3]
    # A fixed address held by another port names the holder and its pod.
    with pytest.raises(AddressInUse, match=r"address 10.9.0.2 is in use by port \d+ \(device pod-\d+\)"):
        backend.ensure_port(network, subnet.id, "shop/other", "pod-x", "10.9.0.2", [], tags("c1", "pod-x"))
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
