"""The network translation's state and questions (web/): what ``kuberaven net get`` and ``net can-reach`` answer.

    GET /api/v1/network/{networks,ports,loadbalancers,policies}[?cluster=C][&namespace=NS][&q=TEXT][&sort=[-]COL]
        [&limit&offset] ──► one page of translation rows (searched and sorted in SQL)
        ──► listing_store's rows of that page ──► a page of rows (the web UI's network view, ``kuberaven net get``)
    GET /api/v1/network/can-reach?from=NS/A|ADDRESS&to=NS/B|NS/svc/NAME[&port=N][&protocol=TCP][&via=ingress]
        [&cluster=C]
        ──► reach_store.ask() (the rows, and the backend that made them) ──► allowed + every hop that decides

A bad question is a 422 naming the problem, an unknown pod or Service a 404,
a backend that cannot be read (OpenStack down) a 502.
"""

from __future__ import annotations

import functools
from typing import Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from ..model import Database
from ..model.errors import DoesNotExist, ValidationError
from ..model.network import NetworkTranslation
from ..network.backend import BackendError
from ..network.listing_store import list_network
from ..network.reach_backends import ReachBackends
from ..network.reach_store import ask, document
from ..network.rules.listing import KINDS
from ..network.rules.reach import ReachError, UnknownPod
from .api import MAX_LIMIT
from .listing import contains, order

LISTING_DOC = {
    "networks": "Each namespace's network, subnet (CIDR, gateway), default security group and number of ports.",
    "ports": "Each pod's port: address, MAC, node, network and security groups (with the namespace or policy "
    "that made each).",
    "loadbalancers": "Each Service's load balancer: VIP, floating IP (or why none), listeners with their pools "
    "and members (openstack backend: the members the translation set, from its state).",
    "policies": "Each NetworkPolicy's security group, directions, rules (embedded backend) and the pods whose "
    "ports carry it.",
}


BAD_GATEWAY = 502
SORTED = {"cluster": NetworkTranslation.cluster, "namespace": NetworkTranslation.namespace}


def network_router(database: Database, backends: ReachBackends | None = None) -> APIRouter:
    """``backends``: what can-reach reads (the daemon's, with its OpenStack cloud); default: the OS_* variables."""
    router = APIRouter(prefix="/api/v1/network", tags=["network"])
    reach_backends = backends or ReachBackends(database)

    @router.get("/can-reach")
    async def can_reach(
        source: str = Query(alias="from", description="NAMESPACE/POD sending, or an outside IP address"),
        target: str = Query(alias="to", description="NAMESPACE/POD or NAMESPACE/svc/SERVICE receiving"),
        port: int | None = Query(None, description="destination port (a Service's port; default: any port)"),
        protocol: str = Query("TCP", description="TCP, UDP or SCTP"),
        cluster: str | None = Query(None, description="cluster name (default: the only one with that pod)"),
        via: str = Query("cluster-ip", description="a pod to a Service: through cluster-ip or ingress"),
    ) -> dict[str, Any]:
        """Whether a pod or an outside address reaches a pod or a Service, and each hop that decides:
        NetworkPolicies' rules, and a Service's floating IP, listener, allowed_cidrs and members."""
        try:
            reach = await run_in_threadpool(ask, database, source, target, port, protocol, cluster, reach_backends, via)
        except UnknownPod as error:
            raise DoesNotExist(str(error)) from None
        except ReachError as error:
            raise ValidationError("can-reach", None, str(error)) from None
        except BackendError as error:
            raise HTTPException(BAD_GATEWAY, str(error)) from None
        return document({"from": source, "to": target, "port": port, "protocol": protocol, "via": via}, reach)

    for what in KINDS:
        _listing(router, database, what)
    return router


def _listing(router: APIRouter, database: Database, what: str) -> None:
    async def listing(
        cluster: str | None = Query(None, description="only this cluster"),
        namespace: str | None = Query(None, description="only this namespace"),
        q: str | None = Query(None, description="a part of the namespace's or the object's name"),
        sort: str = Query("namespace", description="[-]cluster, [-]namespace or [-]name"),
        limit: int = Query(100, ge=1, le=MAX_LIMIT, description=f"rows a page, 1–{MAX_LIMIT}"),
        offset: int = Query(0, ge=0, le=10**18, description="rows to skip"),
    ) -> JSONResponse:
        search = contains([NetworkTranslation.namespace, NetworkTranslation.name], q)
        total, items = await run_in_threadpool(
            functools.partial(
                list_network,
                database,
                what,
                cluster=cluster,
                namespace=namespace,
                limit=limit,
                offset=offset,
                where=search,
                order_by=_ordering(sort),
            )
        )
        return JSONResponse({"kind": what, "total": total, "limit": limit, "offset": offset, "items": items})

    router.add_api_route(
        f"/{what}",
        listing,
        methods=["GET"],
        summary=f"List {what}",
        description=LISTING_DOC[what],
        name=f"network_{what}",
    )


def _ordering(sort: str) -> list[Any]:
    """By the sorted column, then (ascending) cluster, namespace and name: the order of ``kuberaven net get``."""
    columns = {**SORTED, "name": NetworkTranslation.name}
    first = order(columns, sort, "namespace", NetworkTranslation.id)[0]
    rest = [NetworkTranslation.cluster, NetworkTranslation.namespace, NetworkTranslation.name, NetworkTranslation.id]
    return [first, *rest]
