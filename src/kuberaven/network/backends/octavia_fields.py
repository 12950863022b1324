"""What Octavia's requests say for our load balancers' options (network/backends/, pure): the OpenStack
backend's octavia.py sends these bodies and compares what Octavia shows with them.

Octavia takes an absent field as "its default" rather than a null, names the
options its own way (session_persistence, lb_algorithm, insert_headers) and
adds keys of its own to what it shows: these functions turn a Service's
ListenerOptions, MemberSpecs and HealthMonitor into Octavia's fields and say
whether what it shows differs from them.
"""

from __future__ import annotations

from typing import Any

from ..backend import BackendError
from ..drivers.load_balancers import DEFAULT_LB_METHOD, HealthMonitor, ListenerOptions, MemberSpec, Persistence

OVN_PROVIDER = "ovn"
OVN_LB_METHOD = "SOURCE_IP_PORT"  # the only algorithm the OVN provider offers
OVN_NB_SETTING = "network_ovn_nb_connection"  # the setting that lets kuberaven give OVN the affinity itself
# Why a pool's session_persistence is not asked of the OVN provider: its driver accepts the field (Octavia
# stores and shows it) but never passes it to OVN, whose load balancer picks a member per connection. With
# OVN_NB_SETTING the affinity goes to OVN's own rows instead (ovn_affinity.py).
OVN_NO_PERSISTENCE = (
    "the ovn provider takes no session persistence (Octavia would store it, OVN would not apply it): "
    "each new connection is hashed on source and destination address and port (SOURCE_IP_PORT), so one "
    f"client's connections reach different members; set {OVN_NB_SETTING} (KUBERAVEN_{OVN_NB_SETTING.upper()}) "
    "to OVN's northbound database for kuberaven to set OVN's affinity_timeout itself"
)
# Octavia's listener timeouts (ms) when none is asked for: a removed annotation goes back to these.
OCTAVIA_TIMEOUTS = {
    "timeout_client_data": 50000,
    "timeout_member_connect": 5000,
    "timeout_member_data": 50000,
    "timeout_tcp_inspect": 0,
}


def member_body(member: MemberSpec, subnet: str | None, tags: list[str]) -> dict[str, Any]:
    """One member as Octavia's batch update of a pool's members takes it."""
    if subnet is None:
        raise BackendError(f"member {member.name}: no subnet to put it on")
    body: dict[str, Any] = {
        "name": member.name,
        "address": member.address,
        "protocol_port": member.port,
        "subnet_id": subnet,
        "tags": tags,
    }
    if member.monitor_port:
        body["monitor_port"] = member.monitor_port
    return body


def default_lb_method(provider: str | None) -> str:
    """A pool's algorithm when its Service asks for none: the OVN provider offers SOURCE_IP_PORT only."""
    return OVN_LB_METHOD if provider == OVN_PROVIDER else DEFAULT_LB_METHOD


def given(**fields: Any) -> dict[str, Any]:
    """The fields that are set (Octavia takes an absent field as "the default", not a null)."""
    return {k: v for k, v in fields.items() if v is not None}


def listener_fields(options: ListenerOptions) -> dict[str, dict[str, Any]]:
    """A listener's fields by the option that sets them, as Octavia names and defaults them."""
    return {
        "allowed CIDRs": {"allowed_cidrs": list(options.allowed_cidrs) or None},
        "connection-limit": {"connection_limit": -1 if options.connection_limit is None else options.connection_limit},
        "timeouts": {**OCTAVIA_TIMEOUTS, **options.timeouts.fields()},
        "x-forwarded-for": {"insert_headers": {"X-Forwarded-For": "true"}} if options.x_forwarded_for else {},
    }


def differs(current: Any, wanted: Any) -> bool:
    if isinstance(wanted, list) or isinstance(current, list):
        return sorted(current or []) != sorted(wanted or [])
    if isinstance(wanted, dict):
        return any(str((current or {}).get(k)).lower() != str(v).lower() for k, v in wanted.items())
    return bool(current != wanted)


def persistence(persistence: Persistence | None) -> dict[str, Any] | None:
    """Octavia's session_persistence for ours (None: none)."""
    if persistence is None:
        return None
    found: dict[str, Any] = {"type": persistence.type}
    if persistence.timeout is not None:
        found["persistence_timeout"] = persistence.timeout
    return found


def persistence_for(
    provider: str | None, wanted: Persistence | None, ovn_affinity: bool = False
) -> tuple[dict[str, Any] | None, str | None]:
    """The session_persistence to set on a pool of ``provider``'s, and why the one asked for is not applied
    (None: it is, or none is asked). The OVN provider's pools get none: one it would store but not apply would
    make the pool show an affinity that its packets do not have. ``ovn_affinity``: OVN's NB database is
    reachable (OVN_NB_SETTING), so the affinity is set on OVN's rows instead and nothing is left out."""
    if wanted is not None and provider == OVN_PROVIDER:
        return None, None if ovn_affinity else OVN_NO_PERSISTENCE
    return persistence(wanted), None


def persistence_of(current: dict[str, Any] | None) -> dict[str, Any] | None:
    """What of a pool's session_persistence we set (Octavia adds keys of its own, some null)."""
    if not current:
        return None
    return {k: v for k, v in current.items() if k in ("type", "persistence_timeout") and v is not None}


def monitor_fields(monitor: HealthMonitor) -> dict[str, Any]:
    """The fields of a health monitor that may change in place (its type may not)."""
    fields: dict[str, Any] = {
        "delay": monitor.delay,
        "timeout": monitor.timeout,
        "max_retries": monitor.max_retries,
        "max_retries_down": monitor.max_retries_down,
    }
    if monitor.url_path is not None:
        fields["url_path"] = monitor.url_path
    return fields
