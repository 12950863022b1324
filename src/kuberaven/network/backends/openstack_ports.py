"""Neutron's ports for the OpenStack backend (network/backends/): a pod's port, and what Neutron says of it.

    reconcilers/pods.py ──► NeutronPorts.ensure_ports(requests) ──► each request: found by name and tags
        (kept, or deleted when the pod's IP changed), else created with its fixed IP, groups and binding host
    activation.py ──► NeutronPortStatus.port_statuses() ──► pods' ports' status and binding, one listing

A fixed IP held by another port is AddressInUse naming the holder (the pods
reconciler releases a gone pod's); a subnet with no address left is
AddressesExhausted.
"""

from __future__ import annotations

from typing import Any

from ..backend import CLUSTER_TAG, AddressesExhausted, AddressInUse, BackendError, pool_port_name
from ..drivers.port_status import PortStatus
from ..drivers.ports import Port, PortRequest, ensure_ports_one_by_one
from ..vif import PORT_DOWN
from .openstack_context import OpenStackContext, describe

DEVICE_OWNER = "compute:kuberaven"  # the device_owner of the ports kuberaven makes for pods (pooled ones too)
SUBPORT_OWNER = "trunk:subport"  # the device_owner Neutron's trunk plugin gives an attached subport
INACTIVE_STATUSES = (PORT_DOWN, "BUILD", "ERROR")  # Neutron's port statuses other than ACTIVE
STATUS_FIELDS = ("id", "device_id", "status", "binding:vif_type", "binding:host_id")  # what port_statuses reads
NO_ADDRESS = "IpAddressGenerationFailure"  # Neutron's error type when a subnet has no free address left


class NeutronPorts:
    """PortDriver on Neutron: one request per port (ML2/OVN makes ports one OVN transaction at a time)."""

    def __init__(self, context: OpenStackContext) -> None:
        self.context = context
        self.net = context.net

    def ensure_port(self, request: PortRequest) -> Port:
        errors = self.context.errors
        description = describe(request.tags)
        for port in self.net.ports(network_id=request.network, name=request.name):
            if port.description != description:
                continue
            current = port.fixed_ips[0]["ip_address"] if port.fixed_ips else None
            if request.address in (None, current):
                return self.context.port(port, request.network, current or "")
            self.net.delete_port(port, ignore_missing=True)  # the pod's IP changed
        fixed_ip = {"subnet_id": request.subnet, **({"ip_address": request.address} if request.address else {})}
        try:
            port = self.context.ensure(
                f"port {request.name}",
                lambda: (),
                self.net.create_port,
                request.tags,
                name=request.name,
                network_id=request.network,
                fixed_ips=[fixed_ip],
                device_id=request.device_id,
                device_owner=DEVICE_OWNER,
                security_group_ids=request.security_groups,
                **({"binding_host_id": request.host} if request.host else {}),
            )
        except errors.ConflictException as error:
            raise self._conflict(request, error) from error
        except errors.SDKException as error:
            raise BackendError(f"port {request.name}: {error}") from error
        return self.context.port(port, request.network, port.fixed_ips[0]["ip_address"])

    def _conflict(self, request: PortRequest, error: Exception) -> BackendError:
        """What a 409 on create means: no address left, or the fixed IP held by another port (its holder)."""
        if request.address is None:
            return AddressesExhausted(f"port {request.name}: {error}")
        held = self.net.ports(network_id=request.network, fixed_ips=[f"ip_address={request.address}"])
        holder = next(iter(held), None)
        if holder is None:
            return BackendError(f"port {request.name}: {error}")
        return AddressInUse(request.address, holder.id, holder.device_id or None)

    def ensure_ports(self, requests: list[PortRequest]) -> list[Port | BackendError]:
        return ensure_ports_one_by_one(self, requests)


def create_in_bulk(context: OpenStackContext, bodies: list[dict[str, Any]], what: str) -> list[Any]:
    """ONE POST /v2.0/ports with every one of ``bodies`` (pooled ports, subports); a subnet with no address left
    is AddressesExhausted, any other refusal a BackendError naming ``what``."""
    errors = context.errors
    try:
        return list(context.net.create_ports(bodies))
    except errors.ConflictException as error:
        if NO_ADDRESS in str(error):
            raise AddressesExhausted(f"{what}: {error}") from error
        raise BackendError(f"{what}: {error}") from error
    except errors.SDKException as error:
        raise BackendError(f"{what}: {error}") from error


class NeutronPortStatus:
    """PortStatusDriver on Neutron: which pods' ports OVN has bound (ACTIVE), in one listing."""

    def __init__(self, context: OpenStackContext) -> None:
        self.context = context
        self.net = context.net

    def port_statuses(
        self, cluster: str, ports: list[str] | None = None, inactive: bool = False
    ) -> dict[str, PortStatus]:
        """The status of the cluster's pods' ports, by id: ``ports`` (one listing by id); else every port
        made for one pod (tagged) and, unless ``inactive``, every pooled one (by name); ``inactive``: only those
        not ACTIVE. Pooled ports are left out of ``inactive``: free ones are DOWN by nature, and Neutron lists
        about 300 ports a second, so network/activation.py asks for the held ones by id. A binding Neutron
        could not make is in ``vif_type`` (``binding_failed``)."""
        # An attached subport (a nested pod's pooled port) is the trunk plugin's device_owner.
        query: dict[str, Any] = {"device_owner": [DEVICE_OWNER, SUBPORT_OWNER], "fields": list(STATUS_FIELDS)}
        listings: list[dict[str, Any]]
        if ports is not None:
            if not ports:
                return {}
            listings = [{"id": ports}]
        elif inactive:
            listings = [{"tags": f"{CLUSTER_TAG}{cluster}", "status": list(INACTIVE_STATUSES)}]
        else:
            listings = [{"tags": f"{CLUSTER_TAG}{cluster}"}, {"name": pool_port_name(cluster)}]
        found = self.context.call(
            "ports' status", lambda: [port for listing in listings for port in self.net.ports(**query, **listing)]
        )
        return {
            p.id: PortStatus(p.id, p.device_id or "", p.status or "", p.binding_vif_type or "", p.binding_host_id or "")
            for p in found
        }
