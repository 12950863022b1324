"""Many pods' ports in one transaction (network/backends/, the embedded backend's bulk path).

    translator's batch of PortRequests ──► ports that exist as asked: kept
                                       ──► fixed addresses free: ports + addresses inserted in bulk
                                       ──► anything else (a new IP, an address held, IPAM's pick): one by one

A cold start asks for thousands of ports with the IPs the cluster's CNI gave
its pods; one ORM transaction per port made the translation ~200 pods/s. Here
the common case is a handful of statements per batch, with the same rules as
``EmbeddedBackend.ensure_port`` (which still handles every other case): a port
is found by name and its object's uid tag, an address is taken only if free
in its subnet, and the unique key on (subnet, address) guards against another
process taking it meanwhile (then the batch falls back to one by one).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from ...model.base import table_of
from ...model.database import Database
from ...model.network import NetworkAddress, NetworkResource
from ..backend import BackendError, tagged_cluster, tagged_uid
from ..drivers.ports import Port, PortRequest

RESOURCES = table_of(NetworkResource)
ADDRESSES = table_of(NetworkAddress)
CHUNK = 400  # names or addresses per IN (…): well below SQLite's bound on parameters

# Neutron's default base MAC: the embedded backend's ports look like its ports.
MAC_PREFIX = (0xFA, 0x16, 0x3E)


def port_of(port_id: int, address: str) -> Port:
    """A port as the translator sees it: its MAC follows from its id (unique in the table), nothing to store."""
    low = port_id.to_bytes(8, "big")[-3:]
    return Port(str(port_id), address, ":".join(f"{b:02x}" for b in (*MAC_PREFIX, *low)))


OneByOne = Callable[[list[PortRequest]], list[Port | BackendError]]


def ensure_ports(database: Database, requests: list[PortRequest], one_by_one: OneByOne) -> list[Port | BackendError]:
    results: list[Port | BackendError | None] = [None] * len(requests)
    rest: list[int] = []  # indexes left to the one-by-one path
    try:
        with database.engine.begin() as db:
            existing = _existing_ports(db, requests)
            fresh: list[int] = []
            for index, request in enumerate(requests):
                found = existing.get((request.name, tagged_uid(request.tags)))
                if found is not None and request.address in (None, found[1]):
                    results[index] = port_of(found[0], str(found[1]))
                elif found is None and request.address is not None:
                    fresh.append(index)
                else:
                    rest.append(index)
            held = _held(db, [requests[i] for i in fresh])
            free = [i for i in fresh if (requests[i].subnet, requests[i].address) not in held]
            rest += [i for i in fresh if (requests[i].subnet, requests[i].address) in held]
            for index, port in zip(free, _insert(db, [requests[i] for i in free]), strict=True):
                results[index] = port
    except IntegrityError:
        # An address taken by another process since we looked: nothing of the batch was stored.
        return one_by_one(requests)
    for index, result in zip(rest, one_by_one([requests[i] for i in rest]), strict=True):
        results[index] = result
    assert all(r is not None for r in results), "every request answered"
    return results  # type: ignore[return-value]  # no None left (asserted)


def _chunks(values: list[str]) -> list[list[str]]:
    return [values[i : i + CHUNK] for i in range(0, len(values), CHUNK)]


Found = dict[tuple[str, str | None], tuple[int, str | None]]  # (name, uid tag) → (id, address)
# A batch's names and addresses given at execution: a list given to in_() is a value of the statement, and
# SQLAlchemy's caches of compiled statements kept such lists (pods' addresses) alive.
_PORTS_NAMED = sa.select(RESOURCES.c.id, RESOURCES.c.name, RESOURCES.c.tags, RESOURCES.c.attrs).where(
    RESOURCES.c.kind == "port", RESOURCES.c.name.in_(sa.bindparam("names", expanding=True))
)
_ADDRESSES_HELD = sa.select(ADDRESSES.c.address).where(
    ADDRESSES.c.subnet_id == sa.bindparam("subnet"), ADDRESSES.c.address.in_(sa.bindparam("addresses", expanding=True))
)


def _existing_ports(db: sa.Connection, requests: list[PortRequest]) -> Found:
    """The ports the requests name, as they are."""
    found: Found = {}
    for names in _chunks(sorted({r.name for r in requests})):
        for row in db.execute(_PORTS_NAMED, {"names": names}):
            found[(row.name, tagged_uid(row.tags))] = (row.id, (row.attrs or {}).get("address"))
    return found


def _held(db: sa.Connection, requests: list[PortRequest]) -> set[tuple[str, str | None]]:
    """(subnet, address) of the requested addresses that some port already holds."""
    held: set[tuple[str, str | None]] = set()
    for subnet in {r.subnet for r in requests}:
        wanted = sorted({r.address for r in requests if r.subnet == subnet and r.address})
        for addresses in _chunks(wanted):
            found = db.execute(_ADDRESSES_HELD, {"subnet": int(subnet), "addresses": addresses}).scalars()
            held.update((subnet, address) for address in found)
    return held


def _insert(db: sa.Connection, requests: list[PortRequest]) -> list[Port]:
    if not requests:
        return []
    rows = [
        {
            "kind": "port",
            "name": r.name,
            "parent_id": int(r.network),
            "tags": list(r.tags),
            "cluster": tagged_cluster(r.tags),
            "attrs": {
                "subnet": r.subnet,
                "device_id": r.device_id,
                "security_groups": r.security_groups,
                "address": r.address,
                "host": r.host,
            },
        }
        for r in requests
    ]
    ids = db.execute(sa.insert(RESOURCES).returning(RESOURCES.c.id, sort_by_parameter_order=True), rows).scalars().all()
    db.execute(
        sa.insert(ADDRESSES),
        [
            {"subnet_id": int(r.subnet), "address": r.address, "holder_id": port_id}
            for r, port_id in zip(requests, ids, strict=True)
        ],
    )
    return [port_of(port_id, str(r.address)) for r, port_id in zip(requests, ids, strict=True)]
