"""The tables of the data model (model/): what the cluster is and what it should be.

The models and fields are the original XOS Kubernetes Service's
(research/xos-original.md), with its identity faults fixed:

* a pod (KubernetesServiceInstance) is (cluster, namespace, name) plus its uid;
* a Principal is (trust domain, name); a TrustDomain is (owner cluster, name);
* a Slice is (trust domain, name); an Image is (name, tag, digest);
* any number of KubernetesServices (clusters), each with kubeconfig/context.

``Service`` and ``ServiceInstance`` use single-table inheritance on
``leaf_model_name`` (XOS's own name for the concrete model), so
``ServiceInstance.objects`` still returns every kind of instance.
"""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column, relationship, synonym, validates

from .base import Bookkeeping, Model, Observed
from .errors import ValidationError
from .names import (
    DNS_1035_LABEL,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    LABEL_LIMIT,
    SUBDOMAIN_LIMIT,
    XOS_SERVICE_NAME_LIMIT,
    decode_string_map,
    dns_name_problem,
    plain_name_problem,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = ["DNS_LABEL", "DNS_SUBDOMAIN"]  # re-exported: plugins validate their names with them

PROTOCOLS = ("TCP", "UDP", "SCTP")


class KubectlState(enum.StrEnum):
    """KubernetesResourceInstance.kubectl_state, as the original documents it."""

    CREATED = "CREATED"
    UPDATED = "UPDATED"
    DELETED = "DELETED"


def _fk(target: str, ondelete: str = "CASCADE", **kw: Any) -> sa.ForeignKey:
    return sa.ForeignKey(target, ondelete=ondelete, **kw)


def _check_name(row: Model, pattern: re.Pattern[str], limit: int, what: str) -> None:
    """A name that becomes a Kubernetes object's name."""
    problem = dns_name_problem(getattr(row, "name", None), pattern, limit, what)
    if problem:
        raise ValidationError(type(row).__name__, "name", problem)


def _check_plain_name(row: Model, limit: int | None = None) -> None:
    """A name that never becomes a Kubernetes object's name (names.py)."""
    problem = plain_name_problem(getattr(row, "name", None), limit)
    if problem:
        raise ValidationError(type(row).__name__, "name", problem)


def _require(row: Model, *fields: str) -> None:
    for field in fields:
        if getattr(row, field, None) is None and getattr(row, f"{field}_id", None) is None:
            raise ValidationError(type(row).__name__, field, "is required")


class Site(Bookkeeping, Model):
    __tablename__ = "site"

    name: Mapped[str] = mapped_column(sa.String(200), unique=True)
    login_base: Mapped[str | None] = mapped_column(sa.String(50))
    abbreviated_name: Mapped[str | None] = mapped_column(sa.String(80))
    site_url: Mapped[str | None] = mapped_column(sa.String(512))
    enabled: Mapped[bool] = mapped_column(default=True)

    def validate(self, session: Session) -> None:
        _check_plain_name(self)


class Service(Bookkeeping, Observed, Model):
    """A service; with a trust domain it is (or mirrors) a Kubernetes Service in that namespace."""

    __tablename__ = "service"
    __table_args__ = (
        sa.Index(
            "uq_service_cluster_scoped_name",
            "name",
            unique=True,
            sqlite_where=sa.text("trust_domain_id IS NULL"),
            postgresql_where=sa.text("trust_domain_id IS NULL"),
        ),
        sa.UniqueConstraint("trust_domain_id", "name"),
    )
    natural_key = ("trust_domain", "name")

    leaf_model_name: Mapped[str] = mapped_column(sa.String(64))
    name: Mapped[str] = mapped_column(sa.String(63))
    description: Mapped[str | None] = mapped_column(sa.Text)
    enabled: Mapped[bool] = mapped_column(default=True)
    kind: Mapped[str] = mapped_column(sa.String(30), default="generic")
    trust_domain_id: Mapped[int | None] = mapped_column(
        _fk("trust_domain.id", use_alter=True, name="fk_service_trust_domain_id_trust_domain")
    )
    # KubernetesService only: how to reach that cluster (None: the default kubeconfig / in-cluster).
    kubeconfig: Mapped[str | None] = mapped_column(sa.String(1024))
    context: Mapped[str | None] = mapped_column(sa.String(253))

    trust_domain: Mapped[TrustDomain | None] = relationship(foreign_keys=[trust_domain_id])
    ports: Mapped[list[ServicePort]] = relationship(
        back_populates="service", cascade="all, delete-orphan", passive_deletes=True
    )

    __mapper_args__: ClassVar[dict[str, Any]] = {
        "polymorphic_on": "leaf_model_name",
        "polymorphic_identity": "Service",
    }

    def validate(self, session: Session) -> None:
        if self.trust_domain is None and self.trust_domain_id is None:
            # No namespace: an XOS service (SimpleExampleService), never a Kubernetes Service.
            _check_plain_name(self, XOS_SERVICE_NAME_LIMIT)
        else:
            _check_name(self, DNS_1035_LABEL, LABEL_LIMIT, "Kubernetes Service name (a-z, 0-9, '-'; a letter first)")


class KubernetesService(Service):
    """One Kubernetes cluster. Trust domains, and through them everything else, belong to one."""

    natural_key = ("name",)
    __mapper_args__: ClassVar[dict[str, Any]] = {"polymorphic_identity": "KubernetesService"}

    def validate(self, session: Session) -> None:
        super().validate(session)
        if self.trust_domain_id is not None or self.trust_domain is not None:
            raise ValidationError("KubernetesService", "trust_domain", "a cluster does not live in a namespace")


class ServicePort(Bookkeeping, Model):
    __tablename__ = "service_port"
    __table_args__ = (sa.UniqueConstraint("service_id", "name"),)
    natural_key = ("service", "name")

    name: Mapped[str] = mapped_column(sa.String(63), default="")
    external_port: Mapped[int | None]
    internal_port: Mapped[int | None]
    protocol: Mapped[str] = mapped_column(sa.String(8), default="TCP")
    service_id: Mapped[int] = mapped_column(_fk("service.id"))

    service: Mapped[Service] = relationship(back_populates="ports")

    def validate(self, session: Session) -> None:
        _require(self, "service")
        service = self.service or session.get(Service, self.service_id)
        if self.name and service is not None and (service.trust_domain_id or service.trust_domain) is not None:
            _check_name(self, DNS_LABEL, LABEL_LIMIT, "port name of a Kubernetes Service")
        elif self.name:
            _check_plain_name(self)
        if self.protocol not in PROTOCOLS:
            raise ValidationError("ServicePort", "protocol", f"{self.protocol!r} is not one of {', '.join(PROTOCOLS)}")
        for field in ("external_port", "internal_port"):
            port = getattr(self, field)
            if port is not None and not (isinstance(port, int) and 1 <= port <= 65535):
                raise ValidationError("ServicePort", field, f"{port!r} is not a port number (1-65535)")


class TrustDomain(Bookkeeping, Observed, Model):
    """A namespace of one cluster."""

    __tablename__ = "trust_domain"
    __table_args__ = (sa.UniqueConstraint("owner_id", "name"),)
    natural_key = ("owner", "name")

    name: Mapped[str] = mapped_column(sa.String(63))
    owner_id: Mapped[int] = mapped_column(_fk("service.id"))

    owner: Mapped[Service] = relationship(foreign_keys=[owner_id])

    def validate(self, session: Session) -> None:
        _check_name(self, DNS_LABEL, LABEL_LIMIT, "namespace name (lower-case letters, digits, '-')")
        _require(self, "owner")
        owner = self.owner or session.get(Service, self.owner_id)
        if owner is not None and not isinstance(owner, KubernetesService):
            what = f"{type(owner).__name__} {owner.name!r}"
            raise ValidationError("TrustDomain", "owner", f"must be a KubernetesService (a cluster), not {what}")


class Principal(Bookkeeping, Observed, Model):
    """A service account in one trust domain."""

    __tablename__ = "principal"
    __table_args__ = (sa.UniqueConstraint("trust_domain_id", "name"),)
    natural_key = ("trust_domain", "name")

    name: Mapped[str] = mapped_column(sa.String(253))
    trust_domain_id: Mapped[int] = mapped_column(_fk("trust_domain.id"))

    trust_domain: Mapped[TrustDomain] = relationship()

    def validate(self, session: Session) -> None:
        _check_name(self, DNS_SUBDOMAIN, SUBDOMAIN_LIMIT, "service account name")
        _require(self, "trust_domain")


class Slice(Bookkeeping, Model):
    """A group of instances: what a controller (Deployment, StatefulSet, ...) runs."""

    __tablename__ = "slice"
    __table_args__ = (sa.UniqueConstraint("trust_domain_id", "name"),)
    natural_key = ("trust_domain", "name")

    name: Mapped[str] = mapped_column(sa.String(253))
    site_id: Mapped[int] = mapped_column(_fk("site.id"))
    service_id: Mapped[int | None] = mapped_column(_fk("service.id", "SET NULL"))
    trust_domain_id: Mapped[int] = mapped_column(_fk("trust_domain.id"))
    principal_id: Mapped[int | None] = mapped_column(_fk("principal.id", "SET NULL"))
    controller_kind: Mapped[str | None] = mapped_column(sa.String(63))
    controller_replica_count: Mapped[int | None]
    controller_uid: Mapped[str | None] = mapped_column(sa.String(64))
    description: Mapped[str | None] = mapped_column(sa.Text)
    enabled: Mapped[bool] = mapped_column(default=True)
    max_instances: Mapped[int] = mapped_column(default=10)

    site: Mapped[Site] = relationship()
    service: Mapped[Service | None] = relationship(foreign_keys=[service_id])
    trust_domain: Mapped[TrustDomain] = relationship()
    principal: Mapped[Principal | None] = relationship()

    def validate(self, session: Session) -> None:
        _check_plain_name(self)  # a slice has no Kubernetes object of its own
        _require(self, "site", "trust_domain")


class Image(Bookkeeping, Model):
    __tablename__ = "image"
    __table_args__ = (sa.UniqueConstraint("name", "tag", "digest"),)
    natural_key = ("name", "tag", "digest")

    name: Mapped[str] = mapped_column(sa.String(512))
    tag: Mapped[str] = mapped_column(sa.String(128), default="latest")
    digest: Mapped[str] = mapped_column(sa.String(128), default="")
    kind: Mapped[str] = mapped_column(sa.String(16), default="container")

    @property
    def reference(self) -> str:
        from .images import ImageReference

        return str(ImageReference(self.name, self.tag, self.digest))

    def validate(self, session: Session) -> None:
        if not self.name or any(c.isspace() for c in self.name) or "@" in self.name:
            raise ValidationError("Image", "name", f"{self.name!r} is not an image name")
        if self.tag and (":" in self.tag or "/" in self.tag):
            raise ValidationError("Image", "tag", f"{self.tag!r} is not an image tag")
        if self.kind not in ("container", "vm"):
            raise ValidationError("Image", "kind", f"{self.kind!r} is not 'container' or 'vm'")


class ServiceInstance(Bookkeeping, Observed, Model):
    """An instance of a service; the Kubernetes kinds below add their fields to this table."""

    __tablename__ = "service_instance"
    __table_args__ = (
        sa.Index(
            "uq_service_instance_pod",
            "owner_id",
            "trust_domain_id",
            "name",
            unique=True,
            sqlite_where=sa.text("leaf_model_name = 'KubernetesServiceInstance'"),
            postgresql_where=sa.text("leaf_model_name = 'KubernetesServiceInstance'"),
        ),
    )

    leaf_model_name: Mapped[str] = mapped_column(sa.String(64))
    name: Mapped[str] = mapped_column(sa.String(253))
    owner_id: Mapped[int | None] = mapped_column(_fk("service.id"))
    # The namespace (for a pod: kept from its slice, so (cluster, namespace, name) is unique).
    trust_domain_id: Mapped[int | None] = mapped_column(_fk("trust_domain.id"))
    owner: Mapped[Service | None] = relationship(foreign_keys=[owner_id])
    trust_domain: Mapped[TrustDomain | None] = relationship()

    __mapper_args__: ClassVar[dict[str, Any]] = {
        "polymorphic_on": "leaf_model_name",
        "polymorphic_identity": "ServiceInstance",
    }

    def validate(self, session: Session) -> None:
        _check_plain_name(self)


class KubernetesServiceInstance(ServiceInstance):
    """A pod: what kuberaven should run (xos_managed) or what it found running."""

    natural_key = ("trust_domain", "name")
    observed_fields = Observed.observed_fields | {
        "pod_ip", "pod_ips", "phase", "node", "ready", "restart_count", "containers",
    }  # fmt: skip

    slice_id: Mapped[int | None] = mapped_column(_fk("slice.id"))
    image_id: Mapped[int | None] = mapped_column(_fk("image.id", "RESTRICT"))
    pod_ip: Mapped[str | None] = mapped_column(sa.String(64))
    pod_ips: Mapped[list[str] | None] = mapped_column(sa.JSON)
    phase: Mapped[str | None] = mapped_column(sa.String(32))
    node: Mapped[str | None] = mapped_column(sa.String(253))
    ready: Mapped[bool | None]
    restart_count: Mapped[int | None]
    containers: Mapped[list[dict[str, Any]] | None] = mapped_column(sa.JSON)
    labels: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    need_event: Mapped[bool | None] = mapped_column(default=False)
    last_event_sent: Mapped[str | None] = mapped_column(sa.String(32))

    slice: Mapped[Slice | None] = relationship()
    image: Mapped[Image | None] = relationship()

    __mapper_args__: ClassVar[dict[str, Any]] = {"polymorphic_identity": "KubernetesServiceInstance"}

    def validate(self, session: Session) -> None:
        _check_name(self, DNS_SUBDOMAIN, SUBDOMAIN_LIMIT, "pod name")
        _require(self, "slice", "image")
        slice_ = self.slice or session.get(Slice, self.slice_id)
        if slice_ is not None:
            self.trust_domain = slice_.trust_domain
            if self.owner is None and self.owner_id is None:
                self.owner = slice_.trust_domain.owner


class KubernetesResourceInstance(ServiceInstance):
    """Arbitrary Kubernetes YAML, applied as it is (the escape hatch)."""

    natural_key = ("name",)

    resource_definition: Mapped[str | None] = mapped_column(sa.Text)
    kubectl_state: Mapped[str | None] = mapped_column(sa.String(16))
    applied_objects: Mapped[list[dict[str, Any]] | None] = mapped_column(sa.JSON)

    __mapper_args__: ClassVar[dict[str, Any]] = {"polymorphic_identity": "KubernetesResourceInstance"}

    @validates("kubectl_state")
    def _state(self, _key: str, value: Any) -> Any:
        """The documented CREATED | UPDATED | DELETED; either case accepted."""
        if value is None:
            return None
        try:
            return KubectlState(value.upper() if isinstance(value, str) else value)
        except ValueError:
            allowed = " | ".join(KubectlState)
            raise ValidationError(type(self).__name__, "kubectl_state", f"{value!r} is not {allowed}") from None

    def validate(self, session: Session) -> None:
        super().validate(session)
        if self.owner is None and self.owner_id is None:
            # The cluster: its namespace's, else the first (the one kuberaven was started with).
            td = self.trust_domain or (session.get(TrustDomain, self.trust_domain_id) if self.trust_domain_id else None)
            first = sa.select(KubernetesService).order_by(KubernetesService.id).limit(1)
            self.owner = td.owner if td is not None else session.scalar(first)


class _KeyedData(Bookkeeping, Observed):
    """ConfigMap and Secret: data given by users, keys observed by the inventory."""

    natural_key = ("trust_domain", "name")
    observed_fields = Observed.observed_fields | {"keys"}

    name: Mapped[str] = mapped_column(sa.String(253))
    data: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON, default=dict)
    # The keys Kubernetes holds (inventory); never the values of a Secret.
    keys: Mapped[list[str] | None] = mapped_column(sa.JSON)

    @validates("data")
    def _data(self, _key: str, value: Any) -> Any:
        """The original documents data as a "Json-encoded dictionary": json.dumps({...}) is taken as the dict."""
        data, problem = decode_string_map(value)
        if problem:
            raise ValidationError(type(self).__name__, "data", problem)
        return data

    def validate(self, session: Session) -> None:
        _check_name(self, DNS_SUBDOMAIN, SUBDOMAIN_LIMIT, "object name")  # type: ignore[arg-type]
        _require(self, "trust_domain")  # type: ignore[arg-type]


class KubernetesConfigMap(_KeyedData, Model):
    __tablename__ = "kubernetes_config_map"
    __table_args__ = (sa.UniqueConstraint("trust_domain_id", "name"),)

    trust_domain_id: Mapped[int] = mapped_column(_fk("trust_domain.id"))
    trust_domain: Mapped[TrustDomain] = relationship()


class KubernetesSecret(_KeyedData, Model):
    __tablename__ = "kubernetes_secret"
    __table_args__ = (sa.UniqueConstraint("trust_domain_id", "name"),)

    trust_domain_id: Mapped[int] = mapped_column(_fk("trust_domain.id"))
    trust_domain: Mapped[TrustDomain] = relationship()


class _VolumeMount(Bookkeeping):
    natural_key = ("service_instance", "mount_path")

    mount_path: Mapped[str] = mapped_column(sa.String(1024))
    sub_path: Mapped[str | None] = mapped_column(sa.String(1024))

    def validate(self, session: Session) -> None:
        if not self.mount_path or not self.mount_path.startswith("/"):
            raise ValidationError(type(self).__name__, "mount_path", f"{self.mount_path!r} is not an absolute path")


class KubernetesConfigVolumeMount(_VolumeMount, Model):
    __tablename__ = "kubernetes_config_volume_mount"
    __table_args__ = (sa.UniqueConstraint("service_instance_id", "mount_path"),)

    config_id: Mapped[int] = mapped_column(_fk("kubernetes_config_map.id"))
    service_instance_id: Mapped[int] = mapped_column(_fk("service_instance.id"))
    config: Mapped[KubernetesConfigMap] = relationship()
    service_instance: Mapped[KubernetesServiceInstance] = relationship()
    # The original documents this relation as ``secret`` ("Relation to ConfigMap to be mounted").
    secret = synonym("config")
    aliases: ClassVar[dict[str, str]] = {"secret": "config"}

    def validate(self, session: Session) -> None:
        super().validate(session)
        _require(self, "config", "service_instance")


class KubernetesSecretVolumeMount(_VolumeMount, Model):
    __tablename__ = "kubernetes_secret_volume_mount"
    __table_args__ = (sa.UniqueConstraint("service_instance_id", "mount_path"),)

    secret_id: Mapped[int] = mapped_column(_fk("kubernetes_secret.id"))
    service_instance_id: Mapped[int] = mapped_column(_fk("service_instance.id"))
    secret: Mapped[KubernetesSecret] = relationship()
    service_instance: Mapped[KubernetesServiceInstance] = relationship()

    def validate(self, session: Session) -> None:
        super().validate(session)
        _require(self, "secret", "service_instance")


class WatchPosition(Model):
    """Where a watch of one cluster resumes; written with the rows it produced."""

    __tablename__ = "watch_position"
    __table_args__ = (sa.UniqueConstraint("cluster_id", "target"),)
    natural_key = ("cluster", "target")

    cluster_id: Mapped[int] = mapped_column(_fk("service.id"))
    target: Mapped[str] = mapped_column(sa.String(512))
    resource_version: Mapped[str | None] = mapped_column(sa.String(64))


class OutboxEvent(Model):
    """One pod lifecycle event: the event log, and the queue of the Kafka relay."""

    __tablename__ = "event_outbox"
    natural_key = ("event_id",)

    event_id: Mapped[str] = mapped_column(sa.String(36), unique=True)
    cluster: Mapped[str] = mapped_column(sa.String(63))
    key: Mapped[str] = mapped_column(sa.String(512))
    status: Mapped[str] = mapped_column(sa.String(16))
    payload: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    created: Mapped[Any] = mapped_column(sa.Float, index=True)  # epoch seconds: cheap to compare
    sent: Mapped[float | None] = mapped_column(sa.Float, index=True)
    attempts: Mapped[int] = mapped_column(default=0)
    last_error: Mapped[str | None] = mapped_column(sa.Text)


class SyncTombstone(Model):
    """A managed row was deleted: what the sync loop must still remove from Kubernetes.

    Written in the deleting transaction (model/tombstones.py), so a delete made
    while the daemon is down is still carried out when it starts.
    """

    __tablename__ = "sync_tombstone"
    natural_key = ("model", "row_id")

    model: Mapped[str] = mapped_column(sa.String(64))
    row_id: Mapped[int]
    cluster_id: Mapped[int | None] = mapped_column(index=True)  # no FK: the cluster row may go first
    # The deleted row's object: its namespace (None for a namespace itself) and name.
    namespace: Mapped[str | None] = mapped_column(sa.String(63))
    name: Mapped[str | None] = mapped_column(sa.String(253))
    # A KubernetesResourceInstance's applied objects; a Slice's controller kind.
    applied_objects: Mapped[list[dict[str, Any]] | None] = mapped_column(sa.JSON)
    controller_kind: Mapped[str | None] = mapped_column(sa.String(63))
    # A mount's instance or a port's service: re-applied without the deleted row.
    parent_id: Mapped[int | None]
    created: Mapped[Any] = mapped_column(sa.Float)


# Models users address by name in get/apply/delete, in dependency order.
USER_MODELS: tuple[type[Model], ...] = (
    Site,
    KubernetesService,
    Service,
    ServicePort,
    TrustDomain,
    Principal,
    Slice,
    Image,
    KubernetesConfigMap,
    KubernetesSecret,
    ServiceInstance,
    KubernetesServiceInstance,
    KubernetesResourceInstance,
    KubernetesConfigVolumeMount,
    KubernetesSecretVolumeMount,
)
# The original's other names of a kind: its documents list "KubernetesConfigMapVolumeMount".
KIND_ALIASES: dict[str, type[Model]] = {"KubernetesConfigMapVolumeMount": KubernetesConfigVolumeMount}
MODELS_BY_NAME: dict[str, type[Model]] = {
    m.__name__: m for m in (*USER_MODELS, WatchPosition, OutboxEvent, SyncTombstone)
}
