"""The load balancers of the embedded backend (network/backends/): Octavia's model in network_resource rows.

    translator ──► EmbeddedBackend (embedded.py) ──► EmbeddedLoadBalancers:
        load_balancer (its VIP port's address taken from the subnet) ─► listener ─► pool ─► member,
        the listener's and pool's options as Octavia's fields

One session a call; a load balancer is ACTIVE as soon as it is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import sqlalchemy as sa

from ...model.network import NetworkResource
from ..backend import BackendError
from ..drivers.load_balancers import DEFAULT_LB_METHOD, Listener, ListenerOptions, LoadBalancer, Member, MemberSpec
from .embedded_views import EmbeddedViews


class EmbeddedLoadBalancers(EmbeddedViews):
    """The load-balancer half of EmbeddedBackend (NetworkBackend's load balancers, listeners, pools, members)."""

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
        with self.database.session() as session:
            found = self._find(session, "load_balancer", name, tags)
            if found is not None and found.attrs["vip_address"] == vip_address:
                return LoadBalancer(str(found.id), vip_address, found.attrs["vip_port"])
            if found is not None:
                session.delete(found)
                session.flush()
            subnet_row = self._get(session, "subnet", subnet)
            lb = self._add(session, "load_balancer", name, tags, None, {})
            vip_port = self._add(session, "port", f"{name}:vip", tags, str(lb.id), {"subnet": subnet})
            self._allocate(session, subnet_row, vip_port, vip_address)
            vip_port.attrs = {**vip_port.attrs, "address": vip_address}
            lb.attrs = {
                "vip_address": vip_address,
                "vip_port": str(vip_port.id),
                "subnet": subnet,
                "provisioning_status": "ACTIVE",
                "flavor_id": flavor,
                "availability_zone": zone,
            }
            return LoadBalancer(str(lb.id), vip_address, str(vip_port.id))

    def listeners(self, load_balancer: str) -> list[Listener]:
        with self.database.session() as session:
            rows = session.scalars(
                sa.select(NetworkResource).where(
                    NetworkResource.kind == "listener", NetworkResource.parent_id == int(load_balancer)
                )
            ).all()
            pools = {
                p.parent_id: p
                for p in session.scalars(
                    sa.select(NetworkResource).where(
                        NetworkResource.kind == "pool", NetworkResource.parent_id.in_([r.id for r in rows])
                    )
                )
            }
            return [self._listener(r, pools.get(r.id)) for r in rows]

    @staticmethod
    def _listener(row: NetworkResource, pool: NetworkResource | None) -> Listener:
        protocol = row.attrs["protocol"]
        if pool is None:
            return Listener(str(row.id), row.name, protocol, row.attrs["port"])
        return Listener(
            str(row.id), row.name, protocol, row.attrs["port"], str(pool.id), pool.attrs.get("protocol", protocol)
        )

    def create_listener(
        self, load_balancer: str, name: str, protocol: str, port: int, tags: list[str], pool_protocol: str | None = None
    ) -> Listener:
        with self.database.session() as session:
            self._get(session, "load_balancer", load_balancer)
            listener = self._add(session, "listener", name, tags, load_balancer, {"protocol": protocol, "port": port})
            pool_attrs = {"protocol": pool_protocol or protocol, "lb_algorithm": DEFAULT_LB_METHOD}
            pool = self._add(session, "pool", name, tags, str(listener.id), pool_attrs)
            return Listener(str(listener.id), name, protocol, port, str(pool.id), pool_protocol or protocol)

    def members(self, pool: str) -> list[Member]:
        with self.database.session() as session:
            rows = session.scalars(
                sa.select(NetworkResource).where(
                    NetworkResource.kind == "member", NetworkResource.parent_id == int(pool)
                )
            )
            return [
                Member(str(r.id), r.name, r.attrs["address"], r.attrs["port"], r.attrs.get("monitor_port"))
                for r in rows
            ]

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
        with self.database.session() as session:
            self._get(session, "pool", pool)
            attrs = {"address": address, "port": port, "subnet": subnet, "monitor_port": monitor_port}
            row = self._add(session, "member", name, tags, pool, attrs)
            return Member(str(row.id), name, address, port, monitor_port)

    def set_members(
        self, load_balancer: str, pool: str, members: Sequence[MemberSpec], subnet: str | None, tags: list[str]
    ) -> None:
        """The pool's members become ``members`` in one transaction: the others go, the missing are added."""
        wanted = {m.key: m for m in members}
        with self.database.session() as session:
            self._get(session, "pool", pool)
            rows = session.scalars(
                sa.select(NetworkResource).where(
                    NetworkResource.kind == "member", NetworkResource.parent_id == int(pool)
                )
            )
            for row in rows:
                key = (row.attrs["address"], row.attrs["port"], row.attrs.get("monitor_port"))
                if wanted.pop(key, None) is None:
                    session.delete(row)
            for member in wanted.values():
                if subnet is None:
                    raise BackendError(f"member {member.name}: no subnet to put it on")
                attrs = {
                    "address": member.address,
                    "port": member.port,
                    "subnet": subnet,
                    "monitor_port": member.monitor_port,
                }
                self._add(session, "member", member.name, tags, pool, attrs)

    def ensure_listener_options(
        self, load_balancer: str, listener: Listener, options: ListenerOptions, tags: list[str]
    ) -> list[str]:
        """As Octavia's fields: the listener's allowed_cidrs, connection_limit, timeouts and inserted headers,
        its pool's lb_algorithm, session_persistence and health_monitor. Every option is offered."""
        assert listener.pool is not None
        persistence, monitor = options.persistence, options.monitor
        with self.database.session() as session:
            row = self._get(session, "listener", listener.id)
            row.attrs = {
                **row.attrs,
                "allowed_cidrs": list(options.allowed_cidrs),
                "connection_limit": options.connection_limit,
                **options.timeouts.fields(),
                "x_forwarded_for": options.x_forwarded_for,
            }
            pool = self._get(session, "pool", listener.pool)
            pool.attrs = {
                **pool.attrs,
                "session_persistence": persistence and asdict(persistence),
                "health_monitor": monitor and asdict(monitor),
                "lb_algorithm": options.lb_method or DEFAULT_LB_METHOD,
            }
        return []
