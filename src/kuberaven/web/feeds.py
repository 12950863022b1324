"""Read-only feeds (web/): the pod event log and the network translation state.

outbox (events/) ─► GET /api/v1/events?since=N        a page of events after sequence N
                 ─► GET /api/v1/events/stream?since=N  server-sent events, live (Last-Event-ID resumes)
network tables   ─► GET /api/v1/network/translations   namespace → network, pod → port, Service → LB
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from ..events.log import events_after, newest_seq
from ..model import Database, NetworkTranslation
from ..model.errors import ValidationError
from .api import page, page_params

POLL_SECONDS = 0.5
HEARTBEAT_SECONDS = 15.0
TRANSLATION_FILTERS = ("cluster", "kind", "namespace", "name")


def _since(request: Request) -> int:
    text = request.headers.get("last-event-id") or request.query_params.get("since", "0")
    if not re.fullmatch(r"[0-9]{1,18}", text):  # ASCII digits within SQLite's 64 bits
        raise ValidationError("query", "since", f"must be an event sequence number, not {text[:40]!r}")
    return int(text)


def feeds_router(database: Database) -> APIRouter:
    router = APIRouter(prefix="/api/v1", tags=["feeds"])

    @router.get("/events")
    def events(request: Request) -> dict[str, Any]:
        """Pod events after sequence ``since`` (0: from the oldest kept), oldest first; ``newest`` is the log's end."""
        since = _since(request)
        limit, _, _ = page_params(request)
        items = events_after(database, since, limit)
        return {"items": items, "last": items[-1]["seq"] if items else since, "newest": newest_seq(database)}

    @router.get("/events/stream")
    async def stream(request: Request) -> StreamingResponse:
        """The same events as server-sent events, as they are written (``event: pod``, ``id:`` = seq)."""
        since = _since(request)
        return StreamingResponse(
            _event_stream(database, request, since),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @router.get("/network/translations")
    def translations(request: Request) -> dict[str, Any]:
        """What each namespace, pod and Service became in the network backend (filter by cluster, kind, …)."""
        limit, offset, filters = page_params(request)
        unknown = set(filters) - set(TRANSLATION_FILTERS)
        if unknown:
            raise ValidationError(
                "NetworkTranslation", sorted(unknown)[0], f"no such filter (use {', '.join(TRANSLATION_FILTERS)})"
            )
        criteria = [getattr(NetworkTranslation, k) == v for k, v in filters.items()]
        with database.session() as session:
            total, rows = page(session, NetworkTranslation, criteria, limit, offset)
            items = [
                {
                    "cluster": r.cluster,
                    "kind": r.kind,
                    "namespace": r.namespace,
                    "name": r.name,
                    "uid": r.uid,
                    "backend": r.backend,
                    "state": r.state,
                    "updated": r.updated,
                }
                for r in rows
            ]
        return {"total": total, "limit": limit, "offset": offset, "items": items}

    return router


async def _event_stream(database: Database, request: Request, since: int) -> AsyncIterator[str]:
    last, quiet = since, 0.0
    yield "retry: 2000\n\n"
    while not await request.is_disconnected():
        items = await asyncio.to_thread(events_after, database, last, 500)
        for item in items:
            last = item["seq"]
            yield f"id: {last}\nevent: pod\ndata: {json.dumps(item, default=str)}\n\n"
        if items:
            quiet = 0.0
            continue
        if quiet >= HEARTBEAT_SECONDS:
            yield ": keep-alive\n\n"  # a comment: keeps proxies from closing an idle stream
            quiet = 0.0
        await asyncio.sleep(POLL_SECONDS)
        quiet += POLL_SECONDS
