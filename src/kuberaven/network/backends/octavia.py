"""Octavia load balancers for the OpenStack backend (network/backends/): the half of OpenStackBackend
that drives Octavia (load balancers, listeners, pools, members); openstack.py drives Neutron.

Octavia is waited on (provisioning_status ACTIVE, polled 50 ms ×1.6 up to
5 s, for at most ``timeout``) before and after each change of a load
balancer: it refuses changes (409 "immutable") while one is pending. A load
balancer in ERROR is deleted with cascade and made again.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from ..backend import BackendError, HealthMonitor, Listener, ListenerOptions, LoadBalancer, Member, Persistence

log = logging.getLogger(__name__)

# A pool's algorithm by the load balancer's provider: the ovn provider balances by a hash of the
# connection (source and destination address and port) and refuses any other.
DEFAULT_ALGORITHM = "ROUND_ROBIN"
ALGORITHMS = {"ovn": "SOURCE_IP_PORT"}


def describe(resource_tags: list[str]) -> str:
    return " ".join(resource_tags)


class OctaviaLoadBalancers:
    """Octavia's part of OpenStackBackend (a mixin: the connection, ``_call`` and the Neutron ports are its)."""

    lbaas: Any
    net: Any
    project: str
    timeout: float

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        raise NotImplementedError

    def ensure_port(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def _wait_active(self, load_balancer: str) -> Any:
        """Until the load balancer is ACTIVE; ERROR and the timeout raise."""
        delay, deadline = 0.05, time.monotonic() + self.timeout
        while True:
            lb = self._call(f"load balancer {load_balancer}", lambda: self.lbaas.get_load_balancer(load_balancer))
            if lb.provisioning_status == "ACTIVE":
                return lb
            if lb.provisioning_status == "ERROR":
                raise BackendError(f"load balancer {lb.name} ({lb.id}) is in ERROR")
            if time.monotonic() > deadline:
                raise BackendError(f"load balancer {lb.name} still {lb.provisioning_status} after {self.timeout:.0f}s")
            time.sleep(delay)
            delay = min(delay * 1.6, 5.0)

    def ensure_load_balancer(self, name: str, subnet: str, vip_address: str, tags: list[str]) -> LoadBalancer:
        description = describe(tags)
        lb = None
        for found in self.lbaas.load_balancers(name=name):
            if found.description != description:
                continue
            if found.provisioning_status == "ERROR" or found.vip_address != vip_address:
                log.info("load balancer %s is %s; making it again", name, found.provisioning_status)
                self._delete_load_balancer(found.id)
                continue
            lb = found
        if lb is None:
            lb = self._call(
                f"load balancer {name}",
                lambda: self.lbaas.create_load_balancer(
                    name=name, description=description, vip_subnet_id=subnet, vip_address=vip_address,
                    project_id=self.project, tags=tags,
                ),
            )  # fmt: skip
        lb = self._wait_active(lb.id)
        return LoadBalancer(lb.id, lb.vip_address, self._vip_port(lb, subnet, tags))

    def _vip_port(self, lb: Any, subnet: str, tags: list[str]) -> str:
        if lb.vip_port_id and self.net.find_port(lb.vip_port_id, ignore_missing=True) is not None:
            return str(lb.vip_port_id)
        network = self.net.get_subnet(subnet).network_id
        return self.ensure_port(network, subnet, f"{lb.name}:vip", lb.id, lb.vip_address, [], tags).id

    def listeners(self, load_balancer: str) -> list[Listener]:
        # Read through the load balancer: a listener list filter Octavia does not know would
        # be dropped silently and return every load balancer's listeners.
        lb = self._call(f"load balancer {load_balancer}", lambda: self.lbaas.get_load_balancer(load_balancer))
        found = []
        for ref in lb.listeners or []:
            listener = self._call(f"listener {ref['id']}", functools.partial(self.lbaas.get_listener, ref["id"]))
            found.append(
                Listener(
                    listener.id, listener.name, listener.protocol, listener.protocol_port, listener.default_pool_id
                )
            )
        return found

    def create_listener(self, load_balancer: str, name: str, protocol: str, port: int, tags: list[str]) -> Listener:
        algorithm = ALGORITHMS.get(self._wait_active(load_balancer).provider, DEFAULT_ALGORITHM)
        listener = self._call(
            f"listener {name}",
            lambda: self.lbaas.create_listener(
                loadbalancer_id=load_balancer, name=name, protocol=protocol, protocol_port=port, tags=tags
            ),
        )
        self._wait_active(load_balancer)
        pool = self._call(
            f"pool {name}",
            lambda: self.lbaas.create_pool(
                listener_id=listener.id, name=name, protocol=protocol, lb_algorithm=algorithm, tags=tags
            ),
        )
        self._wait_active(load_balancer)
        return Listener(listener.id, name, protocol, port, pool.id)

    def delete_listener(self, load_balancer: str, listener: Listener) -> None:
        self._wait_active(load_balancer)
        if listener.pool:
            self._call(f"pool of {listener.name}", lambda: self.lbaas.delete_pool(listener.pool, ignore_missing=True))
            self._wait_active(load_balancer)
        self._call(f"listener {listener.name}", lambda: self.lbaas.delete_listener(listener.id, ignore_missing=True))
        self._wait_active(load_balancer)

    def members(self, pool: str) -> list[Member]:
        return [Member(m.id, m.name, m.address, m.protocol_port, m.monitor_port) for m in self.lbaas.members(pool)]

    def create_member(
        self, load_balancer: str, pool: str, name: str, address: str, port: int, subnet: str, tags: list[str],
        monitor_port: int | None = None,
    ) -> Member:  # fmt: skip
        self._wait_active(load_balancer)
        member = self._call(
            f"member {name}",
            lambda: self.lbaas.create_member(
                pool, name=name, address=address, protocol_port=port, subnet_id=subnet, tags=tags,
                **({"monitor_port": monitor_port} if monitor_port else {}),
            ),
        )  # fmt: skip
        self._wait_active(load_balancer)
        return Member(member.id, name, address, port, monitor_port)

    def delete_member(self, load_balancer: str, pool: str, member: str) -> None:
        self._wait_active(load_balancer)
        self._call(f"member {member}", lambda: self.lbaas.delete_member(member, pool, ignore_missing=True))
        self._wait_active(load_balancer)

    # -- a Service's options on listeners and pools ------------------------------

    def ensure_listener_options(
        self, load_balancer: str, listener: Listener, options: ListenerOptions, tags: list[str]
    ) -> None:
        current = self._call(f"listener {listener.name}", lambda: self.lbaas.get_listener(listener.id))
        if sorted(current.allowed_cidrs or []) != list(options.allowed_cidrs):
            self._change(load_balancer, f"allowed CIDRs of {listener.name}", lambda: self.lbaas.update_listener(
                listener.id, allowed_cidrs=list(options.allowed_cidrs) or None))  # fmt: skip
        assert listener.pool is not None
        pool = self._call(f"pool of {listener.name}", functools.partial(self.lbaas.get_pool, listener.pool))
        wanted = _persistence(options.persistence)
        if _persistence_of(pool.session_persistence) != wanted:
            self._change(load_balancer, f"session persistence of {listener.name}",
                         lambda: self.lbaas.update_pool(pool.id, session_persistence=wanted))  # fmt: skip
        self._ensure_monitor(load_balancer, listener, pool.health_monitor_id, options.monitor, tags)

    def _ensure_monitor(
        self, load_balancer: str, listener: Listener, current_id: str | None, monitor: HealthMonitor | None,
        tags: list[str],
    ) -> None:  # fmt: skip
        """The pool's health monitor as ``monitor`` says: updated in place, or (another type) made again."""
        what = f"health monitor of {listener.name}"
        current = self._call(what, lambda: self.lbaas.get_health_monitor(current_id)) if current_id else None
        if current is not None and monitor is not None and current.type == monitor.type:
            fields = _monitor_fields(monitor)
            if any(getattr(current, k) != v for k, v in fields.items()):
                self._change(load_balancer, what, lambda: self.lbaas.update_health_monitor(current.id, **fields))
            return
        if current is not None:
            self._change(load_balancer, what,
                         lambda: self.lbaas.delete_health_monitor(current.id, ignore_missing=True))  # fmt: skip
        if monitor is not None:
            self._change(load_balancer, what, lambda: self.lbaas.create_health_monitor(
                pool_id=listener.pool, name=listener.name, type=monitor.type, tags=tags, **_monitor_fields(monitor)))

    def _change(self, load_balancer: str, what: str, call: Callable[[], Any]) -> None:
        """One change of a load balancer's part, between waits for it to be ACTIVE (Octavia refuses others)."""
        self._wait_active(load_balancer)
        self._call(what, call)
        self._wait_active(load_balancer)

    def _delete_load_balancer(self, load_balancer: str) -> None:
        lb = self.lbaas.find_load_balancer(load_balancer, ignore_missing=True)
        if lb is None:
            return
        self._call(f"load balancer {lb.name}", lambda: self.lbaas.delete_load_balancer(lb.id, cascade=True))
        self._call(f"load balancer {lb.name}", lambda: self.lbaas.wait_for_delete(lb, interval=0.1, wait=self.timeout))
        # The VIP port made for it, when Octavia made none.
        for port in self.net.ports(name=f"{lb.name}:vip", device_id=lb.id):
            self.net.delete_port(port, ignore_missing=True)



def _persistence(persistence: Persistence | None) -> dict[str, Any] | None:
    """Octavia's session_persistence for ours (None: none)."""
    if persistence is None:
        return None
    found: dict[str, Any] = {"type": persistence.type}
    if persistence.timeout is not None:
        found["persistence_timeout"] = persistence.timeout
    return found


def _persistence_of(current: dict[str, Any] | None) -> dict[str, Any] | None:
    """What of a pool's session_persistence we set (Octavia adds keys of its own, some null)."""
    if not current:
        return None
    return {k: v for k, v in current.items() if k in ("type", "persistence_timeout") and v is not None}


def _monitor_fields(monitor: HealthMonitor) -> dict[str, Any]:
    """The fields of a health monitor that may change in place (its type may not)."""
    fields: dict[str, Any] = {"delay": monitor.delay, "timeout": monitor.timeout, "max_retries": monitor.max_retries,
                              "max_retries_down": monitor.max_retries_down}  # fmt: skip
    if monitor.url_path is not None:
        fields["url_path"] = monitor.url_path
    return fields
