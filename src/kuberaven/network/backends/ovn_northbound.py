"""OVN's northbound database (network/backends/), where the OpenStack backend gives OVN what Neutron and
Octavia's ovn provider do not: called from octavia.py and openstack.py, blocking (worker threads).

    octavia.py ──► ensure_affinity(load balancer id, listener protocol, seconds)
        ──► the ovn provider's Load_Balancer rows of that id and protocol: options:affinity_timeout (ovn_affinity.py)
    openstack.py ──► set_filters(cluster, owner, networks, filters)
        ──► ACL rows on the logical switch of each network (rules/source_filters.py: a Service's source ranges
            for the pods that come through its ingress address); the owner's rows on any other switch go
        ──► copy_filters(cluster, network): a new network's switch gets the cluster's filters its others have

Level-based: each call reads the rows from the IDL's replica, compares and writes only what differs. The rows
written here carry the owner (the Service's uid) and the cluster in their external_ids; Neutron leaves ACLs on
switches alone (its own are on port groups). One connection per backend, made at first use within ``timeout``
(a daemon thread: a server that never answers cannot hold up the caller or the process's exit) and kept;
ovsdbapp's IDL reconnects by itself. The replica holds the Load_Balancer columns read here, every ACL and each
switch's name and ACLs: not the ports, which a cloud has most of.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from ..backend import BackendError
from ..drivers.source_filters import SourceFilter
from .ovn_affinity import AFFINITY_OPTION, differing, option_value, provider_rows

NB_SCHEMA = "OVN_Northbound"
LOAD_BALANCER, ACL, LOGICAL_SWITCH = "Load_Balancer", "ACL", "Logical_Switch"
LB_COLUMNS = ("name", "protocol", "options", "external_ids")  # the Load_Balancer columns read and written here
SWITCH_COLUMNS = ("name", "acls")
CLUSTER_KEY, OWNER_KEY = "kuberaven-cluster", "kuberaven-uid"  # an ACL row's external ids: whose it is
NB_TIMEOUT = 10.0  # seconds to connect to the NB database, and for one of its transactions
ROW_WAIT, ROW_POLL = 5.0, 0.1  # seconds a row just made (a load balancer, a network's switch) may take to be seen


def switch_name(network: str) -> str:
    """The logical switch ML2/OVN makes for a Neutron network."""
    return f"neutron-{network}"


def filter_of(acl: Any) -> SourceFilter:
    """An ACL row as the filter it holds."""
    return SourceFilter(str(acl.match), int(acl.priority), str(acl.direction), str(acl.action))


def owned_filters(switch: Any, owner: str) -> dict[SourceFilter, Any]:
    """The ACL rows of ``owner`` on ``switch``, by the filter each holds."""
    return {filter_of(acl): acl for acl in switch.acls if acl.external_ids.get(OWNER_KEY) == owner}


def cluster_filters(switches: Iterable[Any], cluster: str) -> set[tuple[str, SourceFilter]]:
    """Every (owner, filter) of ``cluster`` that some switch holds."""
    return {
        (str(acl.external_ids[OWNER_KEY]), filter_of(acl))
        for switch in switches
        for acl in switch.acls
        if acl.external_ids.get(CLUSTER_KEY) == cluster and OWNER_KEY in acl.external_ids
    }


class OvnNorthbound:
    """OVN's northbound database: the ovn provider's Load_Balancer rows, and ACLs on the pods' switches (blocking
    calls: the backend runs in worker threads). ``remote``: as Neutron's ``[ovn] ovn_nb_connection``
    (``tcp:IP:6641``, ``unix:PATH``)."""

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

    def set_filters(self, cluster: str, owner: str, networks: Sequence[str], filters: Sequence[SourceFilter]) -> None:
        """The switch of each of ``networks`` with exactly ``filters`` of ``owner``, every other switch with none
        of its rows (no networks or no filters: the owner's rows go). A network whose switch is not there yet
        (after ``row_wait``) is an error."""
        api = self._api()
        wanted_on = {switch_name(network) for network in networks}
        switches = self._switches(api, wanted_on if filters else set())
        ids = {CLUSTER_KEY: cluster, OWNER_KEY: owner}
        for switch in switches:
            wanted = set(filters) if switch.name in wanted_on else set()
            self._change(api, switch, owned_filters(switch, owner), wanted, ids)

    def copy_filters(self, cluster: str, network: str) -> None:
        """``network``'s switch with every filter of ``cluster`` that one of its other switches holds: a network
        made after a Service's filters were set gets them too."""
        api = self._api()
        name = switch_name(network)
        switches = self._switches(api, {name})
        switch = next(each for each in switches if each.name == name)
        held = cluster_filters((each for each in switches if each.name != name), cluster)
        for owner in sorted({owner for owner, _ in held}):
            mine = owned_filters(switch, owner)
            wanted = {each for who, each in held if who == owner} | set(mine)
            self._change(api, switch, mine, wanted, {CLUSTER_KEY: cluster, OWNER_KEY: owner})

    def filter_owners(self, cluster: str) -> list[str]:
        """The owners (Services' uids) of every filter of ``cluster`` on any switch: what a garbage collection
        compares with the Services it knows."""
        switches = self._switches(self._api(), set())
        return sorted({owner for owner, _ in cluster_filters(switches, cluster)})

    def _switches(self, api: Any, needed: set[str]) -> list[Any]:
        """Every logical switch, once those ``needed`` are among them (within ``row_wait``)."""
        deadline = time.monotonic() + self.row_wait
        while True:
            switches = self._execute(api.db_find_rows(LOGICAL_SWITCH), LOGICAL_SWITCH)
            missing = needed - {each.name for each in switches}
            if not missing:
                return list(switches)
            if time.monotonic() > deadline:
                raise BackendError(f"OVN northbound database {self.remote}: no Logical_Switch {', '.join(missing)}")
            time.sleep(ROW_POLL)

    def _change(
        self, api: Any, switch: Any, mine: Mapping[SourceFilter, Any], wanted: set[SourceFilter], ids: dict[str, str]
    ) -> None:
        """``switch``'s rows of one owner (``mine``) made ``wanted``, in one transaction (none when equal)."""
        gone = [acl for each, acl in mine.items() if each not in wanted]
        added = sorted(wanted - set(mine))
        if not gone and not added:
            return
        try:
            with api.transaction(check_error=True) as txn:
                for acl in gone:
                    txn.add(api.db_remove(LOGICAL_SWITCH, switch.uuid, "acls", acl.uuid))
                for each in added:
                    txn.add(api.acl_add(switch.uuid, each.direction, each.priority, each.match, each.action, **ids))
        except Exception as error:  # ovsdbapp raises its own and plain exceptions (a timeout, a lost server)
            raise BackendError(f"OVN northbound database {self.remote}: ACLs of {switch.name}: {error}") from error

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
    """An ovsdbapp OVN NB API whose IDL replicates the Load_Balancer columns read here, the ACLs and the
    switches' names and ACLs, and nothing else (a cloud's NB holds every port)."""
    # The package ships no type hints.
    from ovsdbapp.backend.ovs_idl import connection, idlutils  # type: ignore[import-untyped]
    from ovsdbapp.schema.ovn_northbound import impl_idl  # type: ignore[import-untyped]

    helper = idlutils.get_schema_helper(remote, NB_SCHEMA)
    helper.register_columns(LOAD_BALANCER, list(LB_COLUMNS))
    helper.register_table(ACL)  # whole: ovsdbapp's acl_add writes most of its columns
    helper.register_columns(LOGICAL_SWITCH, list(SWITCH_COLUMNS))
    idl = connection.OvsdbIdl(remote, helper)
    # ovsdbapp keeps an API's connection on its class (the first one made wins): a class of its own per
    # connection keeps this one apart from any other in the process.
    api_class = type("OvnNorthboundApi", (impl_idl.OvnNbApiIdlImpl,), {})
    return api_class(connection.Connection(idl, timeout))
