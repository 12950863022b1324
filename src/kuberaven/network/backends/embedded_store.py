"""The rows under the embedded backend (network/backends/): resources and their addresses.

    EmbeddedBackend (embedded.py) ──► EmbeddedStore: find / add a network_resource row by
        (kind, name, cluster and uid tags); the IPAM: take an address of a subnet (or a
        subnet of a subnet pool) in network_address, whose unique (subnet, address) key makes
        two translations, even in two processes, unable to take the same one

A fixed address is taken only if free (else AddressInUse naming its
holder); a free one is the lowest unused host of the subnet (never the
gateway, its first host); a full subnet is AddressesExhausted naming it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ...model.database import Database
from ...model.network import NetworkAddress, NetworkResource
from ..backend import AddressesExhausted, AddressInUse, BackendError, tagged_cluster, tagged_uid


class EmbeddedStore:
    def __init__(self, database: Database) -> None:
        self.database = database

    # -- resources ---------------------------------------------------------

    def _find(self, session: Session, kind: str, name: str, resource_tags: list[str]) -> NetworkResource | None:
        uid = tagged_uid(resource_tags)
        rows = session.scalars(
            sa.select(NetworkResource).where(
                NetworkResource.kind == kind,
                NetworkResource.name == name,
                NetworkResource.cluster == tagged_cluster(resource_tags),
            )
        )
        return next((r for r in rows if tagged_uid(r.tags) == uid), None)

    def _ensure(
        self, kind: str, name: str, resource_tags: list[str], parent: str | None = None, **attrs: Any
    ) -> NetworkResource:
        with self.database.session() as session:
            found = self._find(session, kind, name, resource_tags)
            if found is not None:
                return found
            return self._add(session, kind, name, resource_tags, parent, attrs)

    @staticmethod
    def _add(
        session: Session, kind: str, name: str, resource_tags: list[str], parent: str | None, attrs: dict[str, Any]
    ) -> NetworkResource:
        row = NetworkResource(
            kind=kind,
            name=name,
            parent_id=int(parent) if parent else None,
            tags=list(resource_tags),
            attrs=attrs,
            cluster=tagged_cluster(resource_tags),
        )
        session.add(row)
        session.flush()
        return row

    @staticmethod
    def _get(session: Session, kind: str, resource: str) -> NetworkResource:
        row = session.get(NetworkResource, int(resource))
        if row is None or row.kind != kind:
            raise BackendError(f"{kind} {resource} does not exist")
        return row

    # -- IPAM --------------------------------------------------------------

    def _allocate(self, session: Session, subnet: NetworkResource, holder: NetworkResource, address: str | None) -> str:
        network = ipaddress.ip_network(subnet.attrs["cidr"])
        if address is not None:
            if ipaddress.ip_address(address) not in network:
                raise BackendError(f"address {address} is not in subnet {subnet.name} ({network})")
            self._take(session, subnet, holder, address)
            return address
        hosts = (str(host) for host in network.hosts() if str(host) != subnet.attrs["gateway"])
        taken = self._take_first_free(session, subnet, holder, hosts)
        if taken is None:
            raise AddressesExhausted(f"subnet {subnet.name} ({network}) has no free address")
        return taken

    def _take_first_free(
        self, session: Session, owner: NetworkResource, holder: NetworkResource, candidates: Iterable[str]
    ) -> str | None:
        """Take the first candidate not in use in ``owner`` (a subnet, or a subnet pool); None if none is left."""
        used = set(session.scalars(sa.select(NetworkAddress.address).where(NetworkAddress.subnet_id == owner.id)))
        for candidate in candidates:
            if candidate in used:
                continue
            try:
                self._take(session, owner, holder, candidate)
                return candidate
            except AddressInUse:
                continue  # taken meanwhile by a concurrent allocation: try the next one
        return None

    def _take(self, session: Session, subnet: NetworkResource, holder: NetworkResource, address: str) -> None:
        try:
            with session.begin_nested():
                session.add(NetworkAddress(subnet_id=subnet.id, address=address, holder_id=holder.id))
        except IntegrityError:
            held = session.scalars(
                sa.select(NetworkAddress).where(
                    NetworkAddress.subnet_id == subnet.id, NetworkAddress.address == address
                )
            ).first()
            holder_row = session.get(NetworkResource, held.holder_id) if held else None
            device = holder_row.attrs.get("device_id") if holder_row else None
            raise AddressInUse(address, str(held.holder_id) if held else "?", device) from None
