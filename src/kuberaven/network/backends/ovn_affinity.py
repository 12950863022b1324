"""Client-IP affinity on the OVN load balancers of Octavia's ovn provider (network/backends/): the OpenStack
backend's octavia.py hands a ClientIP Service's affinity to OVN's northbound database directly.

    ClientIP Service ──► Persistence ──► octavia.py, load balancer of provider ovn
        ──► OvnNorthbound.ensure_affinity(load balancer id, listener protocol, seconds)
        ──► OVN NB Load_Balancer rows named <load balancer id>, protocol tcp|udp|sctp:
            options:affinity_timeout=<seconds>   (removed when the Service's affinity is)

Why here: the provider's driver accepts a pool's session_persistence and never gives it to OVN, whose own
Load_Balancer rows hold a client's connections to one backend for ``affinity_timeout`` seconds (OVN 22.12
and later). The provider names its rows after the Octavia load balancer's id, one row per protocol, and
writes their vips, external_ids, protocol and selection_fields, never their options: an option set here stays
through the provider's member and listener changes.

Level-based: each call reads the rows from the IDL's replica, compares and writes only what differs. One
connection per backend, made at first use within ``timeout`` (a daemon thread: a server that never answers
cannot hold up the caller or the process's exit) and kept; ovsdbapp's IDL reconnects by itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol, TypeVar

from ..backend import BackendError, Persistence

NB_SCHEMA = "OVN_Northbound"
LOAD_BALANCER = "Load_Balancer"
COLUMNS = ("name", "protocol", "options", "external_ids")  # the Load_Balancer columns read and written here
AFFINITY_OPTION = "affinity_timeout"
PROVIDER_KEY = "neutron:vip"  # the external id every row of the ovn provider carries (its VIP)
DEFAULT_AFFINITY_SECONDS = 10800  # Kubernetes' default sessionAffinityConfig.clientIP.timeoutSeconds
# OVN holds affinity with a learned flow whose idle timeout is 16-bit: northd takes a larger affinity_timeout
# as this many seconds (and logs a warning). Kubernetes allows up to 86400.
MAX_AFFINITY_SECONDS = 65535
NB_TIMEOUT = 10.0  # seconds to connect to the NB database, and for one of its transactions
ROW_WAIT, ROW_POLL = 5.0, 0.1  # seconds a row the provider just made may take to reach the IDL's replica


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


class OvnNorthbound:
    """OVN's northbound database, for the ovn provider's Load_Balancer rows (blocking calls: the backend runs
    in worker threads). ``remote``: as Neutron's ``[ovn] ovn_nb_connection`` (``tcp:IP:6641``, ``unix:PATH``)."""

    def __init__(self, remote: str, timeout: float = NB_TIMEOUT, row_wait: float = ROW_WAIT) -> None:
        self.remote = remote
        self.timeout = timeout
        self.row_wait = row_wait
        self._lock = threading.Lock()
        self._connecting: Future[Any] | None = None

    def ensure_affinity(self, load_balancer: str, protocol: str, seconds: int | None) -> None:
        """Every provider row of ``load_balancer`` for ``protocol`` with ``affinity_timeout`` = ``seconds``
        (None: without it). A row still missing after ``row_wait`` is an error when there is one to set."""
        api = self._api()
        rows = self._rows(api, load_balancer, protocol, needed=seconds is not None)
        for row in differing(rows, seconds):
            if seconds is None:
                command = api.db_remove(LOAD_BALANCER, row.uuid, "options", AFFINITY_OPTION, if_exists=True)
            else:
                command = api.db_set(LOAD_BALANCER, row.uuid, ("options", {AFFINITY_OPTION: option_value(seconds)}))
            self._execute(command, f"{AFFINITY_OPTION} of Load_Balancer {load_balancer} ({protocol.lower()})")

    def close(self) -> None:
        with self._lock:
            connecting, self._connecting = self._connecting, None
        if connecting is not None and connecting.done() and connecting.exception() is None:
            connecting.result().ovsdb_connection.stop(timeout=self.timeout)

    def _rows(self, api: Any, load_balancer: str, protocol: str, needed: bool) -> list[Any]:
        deadline = time.monotonic() + self.row_wait
        while True:
            found = self._execute(api.db_find_rows(LOAD_BALANCER, ("name", "=", load_balancer)), "Load_Balancer")
            rows = provider_rows(found, load_balancer, protocol)
            if rows or not needed:
                return rows
            if time.monotonic() > deadline:
                raise BackendError(
                    f"OVN northbound database {self.remote}: no Load_Balancer row of the ovn provider named "
                    f"{load_balancer} with protocol {protocol.lower()}"
                )
            time.sleep(ROW_POLL)

    def _execute(self, command: Any, what: str) -> Any:
        try:
            return command.execute(check_error=True)
        except Exception as error:  # ovsdbapp raises its own and plain exceptions (a timeout, a lost server)
            raise BackendError(f"OVN northbound database {self.remote}: {what}: {error}") from error

    def _api(self) -> Any:
        """The connected ovsdbapp API: the connection made once (a failed attempt is made again next time)."""
        with self._lock:
            if self._connecting is None:
                self._connecting = _connect_in_background(self.remote, self.timeout)
            connecting = self._connecting
        try:
            return connecting.result(timeout=self.timeout)
        except FutureTimeout:
            raise BackendError(
                f"OVN northbound database {self.remote}: no connection within {self.timeout:.0f}s"
            ) from None
        except Exception as error:
            with self._lock:
                if self._connecting is connecting:
                    self._connecting = None
            raise BackendError(
                f"OVN northbound database {self.remote}: {error or type(error).__name__} (is it Neutron's "
                "[ovn] ovn_nb_connection, and does its ovsdb-server listen there?)"
            ) from error


def _connect_in_background(remote: str, timeout: float) -> Future[Any]:
    """``_connect`` on a daemon thread: ovsdbapp's schema fetch blocks without a bound of its own."""
    made: Future[Any] = Future()

    def run() -> None:
        try:
            made.set_result(_connect(remote, timeout))
        except BaseException as error:  # handed to the caller waiting on the future
            made.set_exception(error)

    threading.Thread(target=run, name="ovn-nb-connect", daemon=True).start()
    return made


def _connect(remote: str, timeout: float) -> Any:
    """An ovsdbapp OVN NB API whose IDL replicates the Load_Balancer columns read here, and nothing else (a
    cloud's NB holds every port)."""
    # The package ships no type hints.
    from ovsdbapp.backend.ovs_idl import connection, idlutils  # type: ignore[import-untyped]
    from ovsdbapp.schema.ovn_northbound import impl_idl  # type: ignore[import-untyped]

    helper = idlutils.get_schema_helper(remote, NB_SCHEMA)
    helper.register_columns(LOAD_BALANCER, list(COLUMNS))
    idl = connection.OvsdbIdl(remote, helper)
    # ovsdbapp keeps an API's connection on its class (the first one made wins): a class of its own per
    # connection keeps this one apart from any other in the process.
    api_class = type("OvnNorthboundApi", (impl_idl.OvnNbApiIdlImpl,), {})
    return api_class(connection.Connection(idl, timeout))
