"""What can-reach reads of the embedded backend (network/backends/): ports, rules, load balancers, from its rows.

    reach_store.py ──► EmbeddedBackend.read_ports / read_rules / read_load_balancer
        ──► network_resource rows: port (address, security_groups), security_group_rule,
            load_balancer ─► listener (allowed_cidrs) ─► pool ─► member; floating_ip (port = the VIP port)
        ──► views.py values

Read-only, one session a call; the translator writes these rows through the
rest of the backend.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ...model.network import NetworkResource
from ..drivers.security_groups import SecurityGroupRule
from ..views import ListenerView, LoadBalancerView, MemberView, PortView
from .embedded_groups import rule_of, rule_rows
from .embedded_store import EmbeddedStore


def _ids(values: Sequence[str]) -> list[int]:
    """The ids this backend can hold (its ids are integers; another backend's are not its)."""
    return sorted({int(v) for v in values if str(v).isdigit()})


def _children(session: Session, kind: str, parents: list[int]) -> list[NetworkResource]:
    if not parents:
        return []
    query = sa.select(NetworkResource).where(NetworkResource.kind == kind, NetworkResource.parent_id.in_(parents))
    return list(session.scalars(query.order_by(NetworkResource.id)))


class EmbeddedViews(EmbeddedStore):
    """The read half of EmbeddedBackend that can-reach uses (NetworkBackend.read_*)."""

    def read_ports(self, ports: Sequence[str]) -> dict[str, PortView]:
        with self.database.session() as session:
            query = sa.select(NetworkResource).where(
                NetworkResource.kind == "port", NetworkResource.id.in_(_ids(ports))
            )
            return {
                str(row.id): PortView(
                    str(row.id),
                    str(row.attrs.get("address") or ""),
                    tuple(str(g) for g in row.attrs.get("security_groups") or []),
                )
                for row in session.scalars(query)
            }

    def read_rules(self, groups: Sequence[str]) -> dict[str, list[SecurityGroupRule]]:
        found: dict[str, list[SecurityGroupRule]] = {str(g): [] for g in groups}
        with self.database.session() as session:
            for row in rule_rows(session, _ids(groups)):
                found[str(row.parent_id)].append(rule_of(row))
        return found

    def read_load_balancer(self, load_balancer: str) -> LoadBalancerView | None:
        if not _ids([load_balancer]):
            return None
        with self.database.session() as session:
            lb = session.get(NetworkResource, int(load_balancer))
            if lb is None or lb.kind != "load_balancer":
                return None
            listeners = _children(session, "listener", [lb.id])
            pools = {p.parent_id: p for p in _children(session, "pool", [r.id for r in listeners])}
            members: dict[int | None, list[MemberView]] = {}
            for m in _children(session, "member", [p.id for p in pools.values()]):
                members.setdefault(m.parent_id, []).append(MemberView(m.name, m.attrs["address"], m.attrs["port"]))
            views = []
            for row in listeners:
                pool = pools.get(row.id)
                views.append(
                    ListenerView(
                        row.name,
                        row.attrs["protocol"],
                        row.attrs["port"],
                        tuple(row.attrs.get("allowed_cidrs") or ()),
                        tuple(members.get(pool.id, []) if pool is not None else ()),
                    )
                )
            floating = sa.select(NetworkResource).where(
                NetworkResource.kind == "floating_ip", NetworkResource.cluster == lb.cluster
            )
            vip_port = lb.attrs.get("vip_port")
            addresses = tuple(
                str(f.attrs["address"]) for f in session.scalars(floating) if f.attrs.get("port") == vip_port
            )
            return LoadBalancerView(str(lb.id), lb.name, lb.attrs["vip_address"], None, addresses, tuple(views))
