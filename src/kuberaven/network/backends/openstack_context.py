"""What every OpenStack driver shares (network/backends/): one cloud connection, its calls and its conventions.

    OpenStackBackend (openstack.py) ──► OpenStackContext ──► each driver: networks, ports, security groups,
        pools, trunks, load balancers, views (openstack_*.py, octavia.py), given this one object at construction
    OpenStackContext: net (Neutron), lbaas (Octavia), the project, call() (an SDK error as BackendError),
        ensure() (find by name and tags, else create), port() (a Neutron port as a Port, its network's MTU)

Neutron (Zed) takes no tags in a POST, so the tags' words also go in the
description (describe()), which a create does carry: a retry after a crash
between create and tagging still finds the resource. A 409 on create means
it exists (a retry, or another kuberaven): it is found and adopted.
Each request's latency is observed (a response hook on the SDK's session).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from ... import metrics
from ..backend import BackendError
from ..drivers.ports import Port
from ..vif import DEFAULT_MTU

# A path segment that is an id: a UUID (with or without dashes) or a number.
ID_IN_PATH = re.compile(r"/(?:[0-9a-fA-F]{8}(?:-?[0-9a-fA-F]{4}){3}-?[0-9a-fA-F]{12}|[0-9]+)(?=/|$)")
# The project of resources when the credentials have none (a Neutron without Keystone).
DEFAULT_PROJECT = "kuberaven"
DEFAULT_TIMEOUT = 300.0  # seconds a load balancer may take to be ACTIVE (octavia.py waits that long)


def describe(resource_tags: list[str]) -> str:
    """A resource's description: its tags' words, which a create carries (tags come only after it)."""
    return " ".join(resource_tags)


def own_project(connection: Any) -> str:
    """The credentials' own project, or DEFAULT_PROJECT when they have none."""
    try:
        return str(connection.current_project_id or DEFAULT_PROJECT)
    except Exception:  # no Keystone (auth_type none): openstacksdk may raise on any lookup
        return DEFAULT_PROJECT


class OpenStackContext:
    """One connection to the cloud and the helpers every OpenStack driver calls it through."""

    def __init__(self, connection: Any, project: str = DEFAULT_PROJECT, timeout: float = DEFAULT_TIMEOUT) -> None:
        from openstack import exceptions

        self.conn = connection
        hooks = connection.session.session.hooks["response"]  # the requests session under openstacksdk's
        if _observed not in hooks:
            hooks.append(_observed)
        self.net = connection.network
        self.lbaas = connection.load_balancer
        self.project = project
        self.timeout = timeout
        self.errors = exceptions
        self._mtus: dict[str, int] = {}  # network → its MTU (asked once: it does not change)
        self._mtus_lock = threading.Lock()

    def call(self, what: str, call: Callable[[], Any]) -> Any:
        """``call()``; an SDK error becomes a BackendError naming ``what``."""
        try:
            return call()
        except self.errors.SDKException as error:
            raise BackendError(f"{what}: {error}") from error

    def ensure(
        self,
        what: str,
        find: Callable[[], Iterable[Any]],
        create: Callable[..., Any],
        resource_tags: list[str],
        **attrs: Any,
    ) -> Any:
        """A Neutron resource: found by name and description (our tags), else created, then tagged.

        A 409 on create is looked for again: made meanwhile by a retry or another kuberaven.
        """
        description = describe(resource_tags)

        def ours() -> Any:
            return next((r for r in find() if r.description == description), None)

        found = ours()
        if found is None:
            try:
                found = create(description=description, project_id=self.project, **attrs)
            except self.errors.ConflictException:
                found = ours()
                if found is None:
                    raise
        if sorted(found.tags or []) != sorted(resource_tags):
            self.call(f"tagging {what}", lambda: self.net.set_tags(found, resource_tags))
        return found

    def port(self, port: Any, network: str, address: str) -> Port:
        """A Neutron port as a Port: its MAC and its network's MTU (asked once per network)."""
        with self._mtus_lock:
            known = self._mtus.get(network)
        if known is None:
            known = self.call(f"network {network}", lambda: self.net.get_network(network)).mtu or DEFAULT_MTU
            with self._mtus_lock:
                self._mtus[network] = known
        return Port(port.id, address, port.mac_address, known)

    def close(self) -> None:
        self.conn.close()


def request_route(url: str) -> str:
    """A request's path with its ids as ``{id}`` (a metric's label: one per API route, not per resource)."""
    return ID_IN_PATH.sub("/{id}", urlsplit(url).path)


def _observed(response: Any, *_args: Any, **_kwargs: Any) -> None:
    """The requests session's response hook: each Neutron, Octavia and Keystone request's latency."""
    request = response.request
    metrics.OPENSTACK_REQUEST_SECONDS.labels(request.method, request_route(request.url)).observe(
        response.elapsed.total_seconds()
    )
