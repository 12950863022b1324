"""A translated Service's status (network/, the API edge): what ``kubectl get/describe svc`` shows of it.

    loadbalancers.py ──► write_status(): status.loadBalancer.ingress[0].ip = the floating IP (EXTERNAL-IP)
                                          status.conditions[kuberaven.io/FloatingIPAssigned] (type LoadBalancer),
                                          [kuberaven.io/SourceRangesEnforced] (while it has source ranges)
                     ──► PATCH services/NAME/status, only when either differs from what the Service shows
                     ──► clear_status(): all of it taken back once the Service is no longer translated
                     ──► service_events(): the Events of a translation (`kubectl describe svc`), from the state
                         it left and the one before

A strategic merge patch: the conditions list is merged by type, so other
controllers' conditions stay.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

from ..kube.client import KubeClient
from ..kube.errors import NotFound
from ..kube.event_recorder import (
    NORMAL,
    REASON_FAILED,
    REASON_FLOATING_IP,
    REASON_LOAD_BALANCER_READY,
    REASON_OPTION_REFUSED,
    WARNING,
)
from .annotations import object_path
from .rules.services import (
    FLOATING_IP_CONDITION,
    OPTIONS_CONDITION,
    SOURCE_RANGES_CONDITION,
    floating_ip_condition,
    options_condition,
    source_ranges_condition,
)
from .rules.source_ranges import Enforcement

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REASON_SOURCE_RANGES = "SourceRanges"  # the Event saying how a Service's source ranges hold


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def write_status(
    client: KubeClient, service: dict[str, Any], state: dict[str, Any], wants_floating_ip: bool
) -> None:
    """Ingress and condition from the translation ``state`` (floating_address, floating_error, floating_reason)."""
    status = service.get("status") or {}
    address = state.get("floating_address")
    patch: dict[str, Any] = {}
    ingress = (status.get("loadBalancer") or {}).get("ingress") or []
    if (ingress[0].get("ip") if ingress else None) != address:
        patch["loadBalancer"] = {"ingress": [{"ip": address}] if address else None}
    conditions = status.get("conditions") or []
    if wants_floating_ip:
        now = now_rfc3339()
        reason = "Assigned" if address else str(state.get("floating_reason") or "Failed")
        condition = floating_ip_condition(conditions, address, state.get("floating_error"), reason, now)
        if condition is not None:
            patch["conditions"] = [condition]
    elif any(c.get("type") == FLOATING_IP_CONDITION for c in conditions):  # no longer type LoadBalancer
        patch["conditions"] = [{"$patch": "delete", "type": FLOATING_IP_CONDITION}]
    options = options_condition(conditions, state.get("option_errors") or [], now_rfc3339())
    if options is not None:
        patch["conditions"] = [*patch.get("conditions", []), options]
    ranges = source_ranges_condition(conditions, state.get("ranges_how"), state.get("ranges_message"), now_rfc3339())
    if ranges is not None:
        patch["conditions"] = [*patch.get("conditions", []), ranges]
    elif not state.get("ranges_how") and any(c.get("type") == SOURCE_RANGES_CONDITION for c in conditions):
        patch["conditions"] = [*patch.get("conditions", []), {"$patch": "delete", "type": SOURCE_RANGES_CONDITION}]
    await _patch_status(client, service, patch)


async def clear_status(client: KubeClient, service: dict[str, Any], floating_address: str | None) -> None:
    """What write_status() wrote, taken back from a Service no longer translated: the ingress address
    (only if it is still ``floating_address``, the one kuberaven gave) and kuberaven's conditions."""
    status = service.get("status") or {}
    patch: dict[str, Any] = {}
    ingress = (status.get("loadBalancer") or {}).get("ingress") or []
    if floating_address and ingress and ingress[0].get("ip") == floating_address:
        patch["loadBalancer"] = {"ingress": None}
    ours = (FLOATING_IP_CONDITION, OPTIONS_CONDITION, SOURCE_RANGES_CONDITION)
    gone = [{"$patch": "delete", "type": c["type"]} for c in status.get("conditions") or [] if c.get("type") in ours]
    if gone:
        patch["conditions"] = gone
    await _patch_status(client, service, patch)


async def _patch_status(client: KubeClient, service: dict[str, Any], patch: dict[str, Any]) -> None:
    if not patch:
        return
    meta = service["metadata"]
    path = object_path("Service", meta["namespace"], meta["name"]) + "/status"
    with contextlib.suppress(NotFound):
        await client.request("PATCH", path, body={"status": patch}, content_type=STRATEGIC_MERGE_PATCH)


def service_events(backend: str, previous: dict[str, Any] | None, state: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The Events (type, reason, message) of a translation that left ``state`` after ``previous`` (None: the
    first): the load balancer made, and what changed of its floating IP, options and source ranges."""
    before = previous or {}
    members = f"{len(state['listeners'])} listeners, {state['members']} members"
    events = [
        (
            NORMAL,
            REASON_LOAD_BALANCER_READY,
            f"load balancer {state['load_balancer']} on {state['vip_address']} ({backend}): {members}",
        )
    ]
    address = state.get("floating_address")
    if address and address != before.get("floating_address"):
        events.append((NORMAL, REASON_FLOATING_IP, f"floating IP {address}"))
    if state.get("floating_error"):
        events.append((WARNING, REASON_FAILED, f"no floating IP: {state['floating_error']}"))
    for problem in state.get("option_errors") or []:
        if problem not in before.get("option_errors", []):
            events.append((WARNING, REASON_OPTION_REFUSED, f"option left out: {problem}"))
    ranges = state.get("ranges_message")
    if ranges and ranges != before.get("ranges_message"):
        enforced = Enforcement(str(state.get("ranges_how")), ranges).enforced
        events.append((NORMAL if enforced else WARNING, REASON_SOURCE_RANGES, f"source ranges: {ranges}"))
    return events
