"""can-reach's data (network/, the edge): what a question needs, from the translation rows and the backend.

    network_translation (Pod rows: port ids; the Service's row: its load balancer; NetworkPolicy rows:
                         group ↔ policy, directions)                                         ┐
    the backend that made them (reach_backends.py ─► NetworkBackend.read_ports / read_rules /  ├─► reach.py,
        read_load_balancer: the embedded tables, or Neutron and Octavia)                      ┘  reach_service.py
                                                                                               ──► CLI, REST

Read-only. The rows say what was made and for which object; the backend
says what it holds now (a port's groups, a group's rules, a listener's
source ranges and members, the floating IPs), and the pure rules decide.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ..model.database import Database
from ..model.network import NetworkTranslation
from .drivers import NetworkBackend
from .reach_backends import ReachBackends
from .rules.policy import INGRESS
from .rules.reach import (
    VIA_CLUSTER_IP,
    VIA_INGRESS,
    Answer,
    Endpoint,
    Group,
    Question,
    Reach,
    ReachError,
    UnknownPod,
    can_reach,
    from_outside,
    parse_question,
)
from .rules.reach_service import SourceFilters, reach_service
from .rules.source_ranges import CLUSTER_GROUP, CLUSTER_GROUP_LABEL, PODS_FILTERED, RANGES_GROUP, ranges_label

POD, SERVICE, POLICY = "Pod", "Service", "NetworkPolicy"


@dataclass(frozen=True)
class Rows:
    """The translation rows one question needs."""

    backend: str
    pods: dict[str, NetworkTranslation]  # namespace/pod → its row: the pods named, and the Service's namespace's
    service: NetworkTranslation | None
    policies: dict[str, NetworkTranslation]  # security group id → its NetworkPolicy's row
    ranges: dict[str, str]  # security group id → what it is: a Service's source ranges, the cluster's own addresses


def ask(
    database: Database,
    source: str,
    target: str,
    port: int | None = None,
    protocol: str = "TCP",
    cluster: str | None = None,
    backends: ReachBackends | None = None,
    via: str = VIA_CLUSTER_IP,
) -> Reach | Answer:
    """Whether ``source`` (NAMESPACE/POD or an address) reaches ``target`` (NAMESPACE/POD or NAMESPACE/svc/NAME).

    ReachError/UnknownPod say why it cannot be asked; BackendError that the backend could not be read.
    """
    question = parse_question(source, target, port, protocol, via)
    with database.session() as session:
        rows = _rows(session, question, cluster or _only_cluster(session, question))
    opened = backends or ReachBackends(database)
    try:
        return _answer(question, rows, opened.get(rows.backend))
    finally:
        if backends is None:
            opened.close()


def document(question: dict[str, Any], answer: Reach | Answer) -> dict[str, Any]:
    """The answer as the REST API and ``-o json`` give it: the question, then the answer."""
    return {**question, "protocol": str(question["protocol"]).upper(), **answer.as_dict()}


def _answer(question: Question, rows: Rows, backend: NetworkBackend) -> Reach | Answer:
    view = None
    named = {n: row for n, row in rows.pods.items() if n in (question.source, question.target)}
    if rows.service is not None:
        view = backend.read_load_balancer(str(rows.service.state.get("load_balancer")))
        if view is None:
            raise UnknownPod(f"Service {question.target}'s load balancer is not in the {rows.backend} backend")
        addresses = {m.address for listener in view.listeners for m in listener.members}
        named.update((n, row) for n, row in rows.pods.items() if row.state.get("address") in addresses)
    pods = _endpoints(backend, named.values())
    groups = _groups(backend, pods.values(), rows.policies, rows.ranges)
    source = None if question.source_is_address else _named(pods, rows, question.source)
    if view is None:
        target = _named(pods, rows, question.target)
        if source is None:
            return from_outside(question.source, target, groups, question.port, question.protocol)
        return can_reach(source, target, groups, question.port, question.protocol)
    assert rows.service is not None
    members = {e.address: e for e in pods.values()}
    state = rows.service.state
    refused = state.get("option_errors") or []
    on_members = tuple(state.get("source_ranges") or []) if state.get(RANGES_GROUP) else ()
    filtered = tuple(state.get("source_ranges") or []) if state.get(PODS_FILTERED) else None
    ingress = SourceFilters(question.via == VIA_INGRESS, filtered)
    return reach_service(
        source or question.source, view, members, groups, question.port, question.protocol, refused, on_members, ingress
    )


def _named(pods: dict[str, Endpoint], rows: Rows, name: str) -> Endpoint:
    if name not in pods:
        port = rows.pods[name].state.get("port")
        raise UnknownPod(f"pod {name}'s port {port} is not in the {rows.backend} backend (any more)")
    return pods[name]


def _endpoints(backend: NetworkBackend, rows: Iterable[NetworkTranslation]) -> dict[str, Endpoint]:
    """The pods' ports as the backend holds them, by namespace/pod."""
    by_port = {str(r.state["port"]): f"{r.namespace}/{r.name}" for r in rows if r.state.get("port")}
    found = backend.read_ports(sorted(by_port))
    return {by_port[p]: Endpoint(by_port[p], view.address, view.security_groups) for p, view in found.items()}


def _groups(
    backend: NetworkBackend,
    endpoints: Iterable[Endpoint],
    policies: dict[str, NetworkTranslation],
    ranges: dict[str, str],
) -> dict[str, Group]:
    """The groups of these ports with their rules (the backend's) and the policy each translates (the rows'). The
    groups of source ranges restrict ingress as a policy's do (they replace the namespace's allow-all group)."""
    ids = sorted({g for e in endpoints for g in e.groups})
    groups = {}
    for group, rules in backend.read_rules(ids).items():
        if group in ranges:
            groups[group] = Group(group, ranges[group], frozenset({INGRESS}), tuple(rules))
            continue
        policy = policies.get(group)
        key = f"{policy.namespace}/{policy.name}" if policy else None
        directions = frozenset(policy.state.get("directions") or []) if policy else frozenset()
        groups[group] = Group(group, key, directions, tuple(rules))
    return groups


def _rows(session: Session, question: Question, cluster: str) -> Rows:
    namespace, name = question.target_name
    named = [] if question.target_is_service else [question.target]
    if not question.source_is_address:
        named.append(question.source)
    service = None
    pods = {}
    if question.target_is_service:
        service = _one(session, cluster, SERVICE, namespace, name)
        if service is None:
            raise UnknownPod(f"Service {question.target} has no load balancer in cluster {cluster} (not translated)")
        pods.update(_in_namespace(session, cluster, namespace))  # its members, found by address
    for pod in named:
        pod_namespace, _, pod_name = pod.partition("/")
        row = pods.get(pod) or _one(session, cluster, POD, pod_namespace, pod_name)
        if row is None:
            raise UnknownPod(f"pod {pod} has no port in cluster {cluster} (no such pod, or not translated yet)")
        pods[pod] = row
    backend = (service or next(iter(pods.values()))).backend
    policies = session.scalars(
        sa.select(NetworkTranslation).where(NetworkTranslation.cluster == cluster, NetworkTranslation.kind == POLICY)
    )
    return Rows(
        backend, pods, service, {str(p.state.get("security_group")): p for p in policies}, _ranges(session, cluster)
    )


def _ranges(session: Session, cluster: str) -> dict[str, str]:
    """The groups of the cluster's Services' source ranges, and its group of its own addresses."""
    query = sa.select(NetworkTranslation).where(
        NetworkTranslation.cluster == cluster, NetworkTranslation.kind == SERVICE
    )
    found = {}
    for row in session.scalars(query):
        if row.state.get(RANGES_GROUP):
            found[str(row.state[RANGES_GROUP])] = ranges_label(f"{row.namespace}/{row.name}")
            found[str(row.state[CLUSTER_GROUP])] = CLUSTER_GROUP_LABEL
    return found


def _one(session: Session, cluster: str, kind: str, namespace: str, name: str) -> NetworkTranslation | None:
    query = sa.select(NetworkTranslation).where(
        NetworkTranslation.cluster == cluster,
        NetworkTranslation.kind == kind,
        NetworkTranslation.namespace == namespace,
        NetworkTranslation.name == name,
    )
    return session.scalars(query.order_by(NetworkTranslation.updated.desc())).first()


def _in_namespace(session: Session, cluster: str, namespace: str) -> dict[str, NetworkTranslation]:
    query = sa.select(NetworkTranslation).where(
        NetworkTranslation.cluster == cluster, NetworkTranslation.kind == POD, NetworkTranslation.namespace == namespace
    )
    return {f"{r.namespace}/{r.name}": r for r in session.scalars(query)}


def _only_cluster(session: Session, question: Question) -> str:
    """The one cluster with the object the question names first: the source pod, else the target."""
    if not question.source_is_address:
        kind, text, (namespace, _, name) = POD, question.source, question.source.partition("/")
    else:
        kind, text = (SERVICE if question.target_is_service else POD), question.target
        namespace, name = question.target_name
    query = sa.select(NetworkTranslation.cluster).where(
        NetworkTranslation.kind == kind, NetworkTranslation.namespace == namespace, NetworkTranslation.name == name
    )
    clusters = sorted(set(session.scalars(query.distinct())))
    what = f"pod {text} has no port" if kind == POD else f"Service {text} has no load balancer"
    if not clusters:
        raise UnknownPod(f"{what} in any cluster (no such {kind.lower()}, or not translated yet)")
    if len(clusters) > 1:
        raise ReachError(f"{kind.lower()} {text} is in clusters {', '.join(clusters)}: name one")
    return clusters[0]
