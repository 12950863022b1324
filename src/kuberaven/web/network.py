"""The network translation's state and questions (web/): what ``kuberaven net get`` and ``net can-reach`` answer.

    GET /api/v1/network/{networks,ports,loadbalancers,policies}[?cluster=C][&namespace=NS][&limit&offset]
        ──► listing_store.list_network() ──► a page of rows (the web UI's network view)
    GET /api/v1/network/can-reach?from=NS/A&to=NS/B[&port=N][&protocol=TCP][&cluster=C]
        ──► reach_store.ask() ──► allowed + the deciding rule

A bad question is a 422 naming the problem, an unknown pod a 404.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from ..model import Database
from ..model.errors import DoesNotExist, ValidationError
from ..network.listing_store import list_network
from ..network.reach_store import ask
from ..network.rules.listing import KINDS
from ..network.rules.reach import ReachError, UnknownPod
from .api import MAX_LIMIT

LISTING_DOC = {
    "networks": "Each namespace's network, subnet (CIDR, gateway), default security group and number of ports.",
    "ports": "Each pod's port: address, MAC, node, network and security groups (with the namespace or policy "
    "that made each).",
    "loadbalancers": "Each Service's load balancer: VIP, floating IP (or why none), listeners with their pools "
    "and members (pools and members: embedded backend).",
    "policies": "Each NetworkPolicy's security group, directions, rules (embedded backend) and the pods whose "
    "ports carry it.",
}


def network_router(database: Database) -> APIRouter:
    router = APIRouter(prefix="/api/v1/network", tags=["network"])

    @router.get("/can-reach")
    async def can_reach(
        source: str = Query(alias="from", description="NAMESPACE/POD sending"),
        target: str = Query(alias="to", description="NAMESPACE/POD receiving"),
        port: int | None = Query(None, description="destination port (default: any port)"),
        protocol: str = Query("TCP", description="TCP, UDP or SCTP"),
        cluster: str | None = Query(None, description="cluster name (default: the only one with that pod)"),
    ) -> dict[str, Any]:
        """Whether NetworkPolicies let one pod reach another, and which rule decides (embedded backend)."""
        try:
            reach = await run_in_threadpool(ask, database, source, target, port, protocol, cluster)
        except UnknownPod as error:
            raise DoesNotExist(str(error)) from None
        except ReachError as error:
            raise ValidationError("can-reach", None, str(error)) from None
        return {"from": source, "to": target, "port": port, "protocol": protocol.upper(), **reach.as_dict()}

    for what in KINDS:
        _listing(router, database, what)
    return router


def _listing(router: APIRouter, database: Database, what: str) -> None:
    async def listing(
        cluster: str | None = Query(None, description="only this cluster"),
        namespace: str | None = Query(None, description="only this namespace"),
        limit: int = Query(100, ge=1, le=MAX_LIMIT, description=f"rows a page, 1–{MAX_LIMIT}"),
        offset: int = Query(0, ge=0, le=10**18, description="rows to skip"),
    ) -> JSONResponse:
        total, items = await run_in_threadpool(
            list_network, database, what, cluster=cluster, namespace=namespace, limit=limit, offset=offset
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
