"""The network translation's questions (web/): GET /api/v1/network/can-reach.

    ?from=NS/A&to=NS/B[&port=N][&protocol=TCP][&cluster=C] ──► reach_store.ask() ──► allowed + the deciding rule

The same answer as ``kuberaven net can-reach``; a bad question is a 422
naming the problem, an unknown pod a 404.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool

from ..model import Database
from ..model.errors import DoesNotExist, ValidationError
from ..network.reach import ReachError, UnknownPod
from ..network.reach_store import ask


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

    return router
