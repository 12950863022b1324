"""Octavia load balancers for the OpenStack backend (network/backends/): the LoadBalancerDriver on Octavia.

    reconcilers/loadbalancers.py ──► OpenStackBackend (openstack.py) ──► OctaviaLoadBalancers ──► Octavia:
        load balancers, listeners, pools, members, health monitors; a VIP port through the ports driver when
        Octavia's network driver made none; ClientIP affinity on OVN's rows (ovn_northbound.py) for the ovn provider

Octavia is waited on (provisioning_status ACTIVE, polled 50 ms ×1.6 up to
1 s, for at most the context's ``timeout``) before and after each change of a
load balancer: it refuses changes (409 "immutable") while one is pending. A
load balancer in ERROR is deleted with cascade and made again.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..backend import BackendError
from ..drivers.load_balancers import (
    HealthMonitor,
    Listener,
    ListenerOptions,
    LoadBalancer,
    Member,
    MemberSpec,
)
from ..drivers.ports import PortDriver, PortRequest
from .octavia_fields import (
    OVN_PROVIDER,
    default_lb_method,
    differs,
    given,
    listener_fields,
    member_body,
    monitor_fields,
    persistence_for,
    persistence_of,
)
from .openstack_context import OpenStackContext, describe
from .ovn_affinity import affinity_seconds
from .ovn_northbound import OvnNorthbound

log = logging.getLogger(__name__)

NOT_IMPLEMENTED = 501  # Octavia's answer to an option its provider driver does not offer
# Waiting for ACTIVE: a GET of the load balancer is cheap, and a longer interval would add up to that much
# to every change (a batch of members is ACTIVE after a provider-bound time; see docs/benchmarks.md).
POLL_FIRST, POLL_FACTOR, POLL_MAX = 0.05, 1.6, 1.0


class ProviderRefused(BackendError):
    """The load balancer's provider does not offer an option a Service asks for; the rest is made."""


class OctaviaLoadBalancers:
    """LoadBalancerDriver on Octavia; also deletes load balancers (with cascade, and the VIP port made for one)."""

    def __init__(
        self, context: OpenStackContext, ports: PortDriver, provider: str | None, ovn_nb: OvnNorthbound | None
    ) -> None:
        """``provider``: the Octavia provider new load balancers ask for (amphora, ovn, …; None: the cloud's);
        ``ovn_nb``: OVN's NB database, where the ovn provider's load balancers get ClientIP affinity."""
        self.context = context
        self.lbaas = context.lbaas
        self.net = context.net
        self.ports = ports
        self.provider = provider
        self.ovn_nb = ovn_nb

    def _wait_active(self, load_balancer: str) -> Any:
        """Until the load balancer is ACTIVE; ERROR and the timeout raise."""
        delay, deadline = POLL_FIRST, time.monotonic() + self.context.timeout
        while True:
            lb = self.context.call(
                f"load balancer {load_balancer}", lambda: self.lbaas.get_load_balancer(load_balancer)
            )
            if lb.provisioning_status == "ACTIVE":
                return lb
            if lb.provisioning_status == "ERROR":
                raise BackendError(f"load balancer {lb.name} ({lb.id}) is in ERROR")
            if time.monotonic() > deadline:
                raise BackendError(
                    f"load balancer {lb.name} still {lb.provisioning_status} after {self.context.timeout:.0f}s"
                )
            time.sleep(delay)
            delay = min(delay * POLL_FACTOR, POLL_MAX)

    def ensure_load_balancer(
        self,
        name: str,
        subnet: str,
        vip_address: str,
        tags: list[str],
        *,
        flavor: str | None = None,
        zone: str | None = None,
    ) -> LoadBalancer:
        description = describe(tags)
        lb = None
        for found in self.lbaas.load_balancers(name=name):
            if found.description != description:
                continue
            if found.provisioning_status == "ERROR" or found.vip_address != vip_address:
                log.info("load balancer %s is %s; making it again", name, found.provisioning_status)
                self.delete_load_balancer(found.id)
                continue
            lb = found
        if lb is None:
            lb = self.context.call(
                f"load balancer {name}",
                lambda: self.lbaas.create_load_balancer(
                    name=name,
                    description=description,
                    vip_subnet_id=subnet,
                    vip_address=vip_address,
                    project_id=self.context.project,
                    tags=tags,
                    **given(provider=self.provider, flavor_id=flavor, availability_zone=zone),
                ),
            )
        lb = self._wait_active(lb.id)
        return LoadBalancer(lb.id, lb.vip_address, self._vip_port(lb, subnet, tags), lb.provider)

    def _vip_port(self, lb: Any, subnet: str, tags: list[str]) -> str:
        if lb.vip_port_id and self.net.find_port(lb.vip_port_id, ignore_missing=True) is not None:
            return str(lb.vip_port_id)
        network = self.net.get_subnet(subnet).network_id
        return self.ports.ensure_port(
            PortRequest(network, subnet, f"{lb.name}:vip", lb.id, lb.vip_address, [], tags)
        ).id

    def listeners(self, load_balancer: str) -> list[Listener]:
        # Read through the load balancer: a listener list filter Octavia does not know would
        # be dropped silently and return every load balancer's listeners.
        lb = self.context.call(f"load balancer {load_balancer}", lambda: self.lbaas.get_load_balancer(load_balancer))
        found = []
        for ref in lb.listeners or []:
            listener = self.context.call(f"listener {ref['id']}", functools.partial(self.lbaas.get_listener, ref["id"]))
            pool = listener.default_pool_id
            pool_protocol = (
                self.context.call(f"pool {pool}", functools.partial(self.lbaas.get_pool, pool)).protocol
                if pool
                else None
            )
            found.append(
                Listener(listener.id, listener.name, listener.protocol, listener.protocol_port, pool, pool_protocol)
            )
        return found

    def create_listener(
        self, load_balancer: str, name: str, protocol: str, port: int, tags: list[str], pool_protocol: str | None = None
    ) -> Listener:
        provider = self._wait_active(load_balancer).provider
        listener = self.context.call(
            f"listener {name}",
            lambda: self.lbaas.create_listener(
                loadbalancer_id=load_balancer, name=name, protocol=protocol, protocol_port=port, tags=tags
            ),
        )
        self._wait_active(load_balancer)
        pool = self.context.call(
            f"pool {name}",
            lambda: self.lbaas.create_pool(
                listener_id=listener.id,
                name=name,
                protocol=pool_protocol or protocol,
                lb_algorithm=default_lb_method(provider),
                tags=tags,
            ),
        )
        self._wait_active(load_balancer)
        return Listener(listener.id, name, protocol, port, pool.id, pool_protocol or protocol)

    def delete_listener(self, load_balancer: str, listener: Listener) -> None:
        self._wait_active(load_balancer)
        if listener.pool:
            self.context.call(
                f"pool of {listener.name}", lambda: self.lbaas.delete_pool(listener.pool, ignore_missing=True)
            )
            self._wait_active(load_balancer)
        self.context.call(
            f"listener {listener.name}", lambda: self.lbaas.delete_listener(listener.id, ignore_missing=True)
        )
        self._wait_active(load_balancer)

    def members(self, pool: str) -> list[Member]:
        return [Member(m.id, m.name, m.address, m.protocol_port, m.monitor_port) for m in self.lbaas.members(pool)]

    def create_member(
        self,
        load_balancer: str,
        pool: str,
        name: str,
        address: str,
        port: int,
        subnet: str,
        tags: list[str],
        monitor_port: int | None = None,
    ) -> Member:
        self._wait_active(load_balancer)
        member = self.context.call(
            f"member {name}",
            lambda: self.lbaas.create_member(
                pool,
                name=name,
                address=address,
                protocol_port=port,
                subnet_id=subnet,
                tags=tags,
                **({"monitor_port": monitor_port} if monitor_port else {}),
            ),
        )
        self._wait_active(load_balancer)
        return Member(member.id, name, address, port, monitor_port)

    def delete_member(self, load_balancer: str, pool: str, member: str) -> None:
        self._wait_active(load_balancer)
        self.context.call(f"member {member}", lambda: self.lbaas.delete_member(member, pool, ignore_missing=True))
        self._wait_active(load_balancer)

    def set_members(
        self, load_balancer: str, pool: str, members: Sequence[MemberSpec], subnet: str | None, tags: list[str]
    ) -> None:
        """Octavia's batch member update: one PUT of the whole member set, whatever changed (a member
        one-by-one waits for the load balancer to be ACTIVE between calls: minutes for a hundred)."""
        current = {m.key for m in self.members(pool)}
        if current == {m.key for m in members}:
            return
        body = {"members": [member_body(m, subnet, tags) for m in members]}
        self._change(
            load_balancer,
            f"members of pool {pool}",
            lambda: _accepted(self.lbaas.put(f"/lbaas/pools/{pool}/members", json=body)),
        )

    # -- a Service's options on listeners and pools ------------------------------

    def ensure_listener_options(
        self, load_balancer: str, listener: Listener, options: ListenerOptions, tags: list[str]
    ) -> list[str]:
        """Each option that differs, changed in place; one the provider refuses is skipped and named."""
        refused: list[str] = []
        current = self.context.call(f"listener {listener.name}", lambda: self.lbaas.get_listener(listener.id))
        for option, fields in listener_fields(options).items():
            if any(differs(getattr(current, k, None), v) for k, v in fields.items()):
                self._optional(
                    refused,
                    load_balancer,
                    f"{option} of {listener.name}",
                    functools.partial(self.lbaas.update_listener, listener.id, **fields),
                )
        assert listener.pool is not None
        pool = self.context.call(f"pool of {listener.name}", functools.partial(self.lbaas.get_pool, listener.pool))
        provider = self._wait_active(load_balancer).provider
        method = options.lb_method or default_lb_method(provider)
        if pool.lb_algorithm != method:
            self._optional(
                refused,
                load_balancer,
                f"lb-method {method} of {listener.name}",
                lambda: self.lbaas.update_pool(pool.id, lb_algorithm=method),
            )
        refused += self._ensure_persistence(load_balancer, listener, pool, provider, options)
        try:
            self._ensure_monitor(load_balancer, listener, pool.health_monitor_id, options.monitor, tags)
        except ProviderRefused as error:
            refused.append(str(error))
        return refused

    def _ensure_persistence(
        self, load_balancer: str, listener: Listener, pool: Any, provider: str | None, options: ListenerOptions
    ) -> list[str]:
        """The pool's session_persistence; on an ovn load balancer none, and with OVN's NB database at hand
        OVN's affinity_timeout on the provider's rows instead (ovn_affinity.py). What is left out, named."""
        refused: list[str] = []
        wanted, left_out = persistence_for(provider, options.persistence, self.ovn_nb is not None)
        if left_out:
            refused.append(f"session persistence of {listener.name}: {left_out}")
        if persistence_of(pool.session_persistence) != wanted:
            self._optional(
                refused,
                load_balancer,
                f"session persistence of {listener.name}",
                lambda: self.lbaas.update_pool(pool.id, session_persistence=wanted),
            )
        if provider == OVN_PROVIDER and self.ovn_nb is not None:
            seconds, clamped = affinity_seconds(options.persistence)
            self.ovn_nb.ensure_affinity(load_balancer, listener.protocol, seconds)
            if clamped:
                refused.append(f"session affinity timeout of {listener.name}: {clamped}")
        return refused

    def _optional(self, refused: list[str], load_balancer: str, what: str, call: Callable[[], Any]) -> None:
        """A change the provider may refuse (501: it does not offer the option): then named in ``refused``."""
        try:
            self._change(load_balancer, what, call)
        except ProviderRefused as error:
            refused.append(str(error))

    def _ensure_monitor(
        self,
        load_balancer: str,
        listener: Listener,
        current_id: str | None,
        monitor: HealthMonitor | None,
        tags: list[str],
    ) -> None:
        """The pool's health monitor as ``monitor`` says: updated in place, or (another type) made again."""
        what = f"health monitor of {listener.name}"
        current = self.context.call(what, lambda: self.lbaas.get_health_monitor(current_id)) if current_id else None
        if current is not None and monitor is not None and current.type == monitor.type:
            fields = monitor_fields(monitor)
            if any(getattr(current, k) != v for k, v in fields.items()):
                self._change(load_balancer, what, lambda: self.lbaas.update_health_monitor(current.id, **fields))
            return
        if current is not None:
            self._change(load_balancer, what, lambda: self.lbaas.delete_health_monitor(current.id, ignore_missing=True))
        if monitor is not None:
            self._change(
                load_balancer,
                what,
                lambda: self.lbaas.create_health_monitor(
                    pool_id=listener.pool, name=listener.name, type=monitor.type, tags=tags, **monitor_fields(monitor)
                ),
            )

    def _change(self, load_balancer: str, what: str, call: Callable[[], Any]) -> None:
        """One change of a load balancer's part, between waits for it to be ACTIVE (Octavia refuses others).
        A provider that does not offer the option (HTTP 501) raises ProviderRefused."""
        self._wait_active(load_balancer)
        try:
            self.context.call(what, call)
        except BackendError as error:
            if getattr(error.__cause__, "status_code", None) == NOT_IMPLEMENTED:
                raise ProviderRefused(f"{what}: {_provider_message(error.__cause__)}") from error
            raise
        self._wait_active(load_balancer)

    def delete_load_balancer(self, load_balancer: str) -> None:
        lb = self.lbaas.find_load_balancer(load_balancer, ignore_missing=True)
        if lb is None:
            return
        self.context.call(f"load balancer {lb.name}", lambda: self.lbaas.delete_load_balancer(lb.id, cascade=True))
        self.context.call(
            f"load balancer {lb.name}", lambda: self.lbaas.wait_for_delete(lb, interval=0.1, wait=self.context.timeout)
        )
        # The VIP port made for it, when Octavia made none.
        for port in self.net.ports(name=f"{lb.name}:vip", device_id=lb.id):
            self.net.delete_port(port, ignore_missing=True)


def _accepted(response: Any) -> None:
    """A raw call's response as the SDK's own calls report it: an error status raises SDKException."""
    from openstack import exceptions

    exceptions.raise_from_response(response)


def _provider_message(error: Any) -> str:
    """What Octavia said, without the SDK's HTTP preamble."""
    return str(getattr(error, "details", None) or error)
