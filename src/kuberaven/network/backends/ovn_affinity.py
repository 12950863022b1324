"""Client-IP affinity on the OVN load balancers of Octavia's ovn provider (network/backends/, pure): which
value, and which rows; the OpenStack backend's octavia.py hands a ClientIP Service's affinity to OVN's
northbound database (ovn_northbound.py) directly.

    ClientIP Service ──► Persistence ──► octavia.py, load balancer of provider ovn
        ──► OvnNorthbound.ensure_affinity(load balancer id, listener protocol, seconds)
        ──► OVN NB Load_Balancer rows named <load balancer id>, protocol tcp|udp|sctp:
            options:affinity_timeout=<seconds>   (removed when the Service's affinity is)

Why here: the provider's driver accepts a pool's session_persistence and never gives it to OVN, whose own
Load_Balancer rows hold a client's connections to one backend for ``affinity_timeout`` seconds (OVN 22.12
and later). The provider names its rows after the Octavia load balancer's id, one row per protocol, and
writes their vips, external_ids, protocol and selection_fields, never their options: an option set here stays
through the provider's member and listener changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from ..drivers.load_balancers import Persistence

AFFINITY_OPTION = "affinity_timeout"
PROVIDER_KEY = "neutron:vip"  # the external id every row of the ovn provider carries (its VIP)
DEFAULT_AFFINITY_SECONDS = 10800  # Kubernetes' default sessionAffinityConfig.clientIP.timeoutSeconds
# OVN holds affinity with a learned flow whose idle timeout is 16-bit: northd takes a larger affinity_timeout
# as this many seconds (and logs a warning). Kubernetes allows up to 86400.
MAX_AFFINITY_SECONDS = 65535


class LoadBalancerRow(Protocol):
    """What is read of an OVN NB Load_Balancer row (ovsdbapp's IDL rows have these attributes)."""

    @property
    def name(self) -> str: ...

    @property
    def protocol(self) -> Sequence[str]: ...  # [] or one of tcp, udp, sctp

    @property
    def options(self) -> Mapping[str, str]: ...

    @property
    def external_ids(self) -> Mapping[str, str]: ...


Row = TypeVar("Row", bound=LoadBalancerRow)


def affinity_seconds(persistence: Persistence | None) -> tuple[int | None, str | None]:
    """The ``affinity_timeout`` a listener's OVN row should have (None: none) and, when the Service asked for
    more than OVN takes, why the value is smaller: said on the Service."""
    if persistence is None:
        return None, None
    asked = persistence.client_timeout or persistence.timeout or DEFAULT_AFFINITY_SECONDS
    if asked <= MAX_AFFINITY_SECONDS:
        return asked, None
    return MAX_AFFINITY_SECONDS, (
        f"timeoutSeconds {asked} is more than OVN's affinity_timeout takes (its learned flows' idle timeout is "
        f"16-bit): {MAX_AFFINITY_SECONDS} applied"
    )


def provider_rows(rows: Iterable[Row], load_balancer: str, protocol: str) -> list[Row]:
    """The ovn provider's rows of Octavia load balancer ``load_balancer`` for a listener of ``protocol``:
    named after its id, of that protocol, carrying the provider's VIP key."""
    wanted = protocol.lower()
    return [
        row
        for row in rows
        if row.name == load_balancer and list(row.protocol) == [wanted] and PROVIDER_KEY in row.external_ids
    ]


def option_value(seconds: int | None) -> str | None:
    """``affinity_timeout`` as the row's options map holds it (None: not there)."""
    return None if seconds is None else str(seconds)


def differing(rows: Iterable[Row], seconds: int | None) -> list[Row]:
    """The rows whose ``affinity_timeout`` is not ``seconds``: the only ones written."""
    wanted = option_value(seconds)
    return [row for row in rows if row.options.get(AFFINITY_OPTION) != wanted]
