"""The tables of what runs in a cluster (model/): instances (pods, raw YAML), config maps, secrets, mounts.

    cluster.py (namespaces, slices, images) ◄── ServiceInstance ──► KubernetesServiceInstance (a pod)
                                                                ──► KubernetesResourceInstance (any YAML)
    KubernetesConfigMap / KubernetesSecret ◄── *VolumeMount ──► a pod's instance

These are the rows the sync loop (provisioning/) turns into Pods, ConfigMaps,
Secrets and applied YAML, and that the inventory (inventory/) fills in for what
it finds. A pod is (cluster, namespace, name) plus its uid.

``ServiceInstance`` uses single-table inheritance on ``leaf_model_name``
(XOS's own name for the concrete model), so ``ServiceInstance.objects``
still returns every kind of instance.
"""

import enum
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column, relationship, synonym, validates

from .base import Bookkeeping, Model, Observed
from .cluster import Image, KubernetesService, Service, Slice, TrustDomain
from .errors import ValidationError
from .fields import check_name, check_plain_name, fk, partial_index, require
from .names import DNS_SUBDOMAIN, SUBDOMAIN_LIMIT, decode_string_map


class KubectlState(enum.StrEnum):
    """KubernetesResourceInstance.kubectl_state, as the original documents it."""

    CREATED = "CREATED"
    UPDATED = "UPDATED"
    DELETED = "DELETED"


class ServiceInstance(Bookkeeping, Observed, Model):
    """An instance of a service; the Kubernetes kinds below add their fields to this table."""

    __tablename__ = "service_instance"
    __table_args__ = (
        partial_index(
            "uq_service_instance_pod",
            "owner_id",
            "trust_domain_id",
            "name",
            unique=True,
            where="leaf_model_name = 'KubernetesServiceInstance'",
        ),
    )

    leaf_model_name: Mapped[str] = mapped_column(sa.String(64))
    name: Mapped[str] = mapped_column(sa.String(253))
    owner_id: Mapped[int | None] = mapped_column(fk("service.id"))
    # The namespace (for a pod: kept from its slice, so (cluster, namespace, name) is unique).
    trust_domain_id: Mapped[int | None] = mapped_column(fk("trust_domain.id"))
    owner: Mapped["Service | None"] = relationship(foreign_keys=[owner_id])
    trust_domain: Mapped["TrustDomain | None"] = relationship()

    __mapper_args__ = {
        "polymorphic_on": "leaf_model_name",
        "polymorphic_identity": "ServiceInstance",
    }

    def validate(self, session: Session) -> None:
        check_plain_name(self)


class KubernetesServiceInstance(ServiceInstance):
    """A pod: what kuberaven should run (xos_managed) or what it found running."""

    natural_key: ClassVar[tuple[str, ...]] = ("trust_domain", "name")
    observed_fields = Observed.observed_fields | {
        "pod_ip",
        "pod_ips",
        "phase",
        "node",
        "ready",
        "restart_count",
        "containers",
    }

    slice_id: Mapped[int | None] = mapped_column(fk("slice.id"))
    image_id: Mapped[int | None] = mapped_column(fk("image.id", "RESTRICT"))
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

    slice: Mapped["Slice | None"] = relationship()
    image: Mapped["Image | None"] = relationship()

    __mapper_args__ = {"polymorphic_identity": "KubernetesServiceInstance"}

    def validate(self, session: Session) -> None:
        check_name(self, DNS_SUBDOMAIN, SUBDOMAIN_LIMIT, "pod name")
        require(self, "slice", "image")
        slice_ = self.slice or session.get(Slice, self.slice_id)
        if slice_ is not None:
            self.trust_domain = slice_.trust_domain
            if self.owner is None and self.owner_id is None:
                self.owner = slice_.trust_domain.owner


class KubernetesResourceInstance(ServiceInstance):
    """Arbitrary Kubernetes YAML, applied as it is (the escape hatch)."""

    natural_key: ClassVar[tuple[str, ...]] = ("name",)

    resource_definition: Mapped[str | None] = mapped_column(sa.Text)
    kubectl_state: Mapped[str | None] = mapped_column(sa.String(16))
    applied_objects: Mapped[list[dict[str, Any]] | None] = mapped_column(sa.JSON)

    __mapper_args__ = {"polymorphic_identity": "KubernetesResourceInstance"}

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

    natural_key: ClassVar[tuple[str, ...]] = ("trust_domain", "name")
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
        check_name(self, DNS_SUBDOMAIN, SUBDOMAIN_LIMIT, "object name")  # type: ignore[arg-type]
        require(self, "trust_domain")  # type: ignore[arg-type]


class KubernetesConfigMap(_KeyedData, Model):
    __tablename__ = "kubernetes_config_map"
    __table_args__ = (sa.UniqueConstraint("trust_domain_id", "name"),)

    trust_domain_id: Mapped[int] = mapped_column(fk("trust_domain.id"))
    trust_domain: Mapped["TrustDomain"] = relationship()


class KubernetesSecret(_KeyedData, Model):
    __tablename__ = "kubernetes_secret"
    __table_args__ = (sa.UniqueConstraint("trust_domain_id", "name"),)

    trust_domain_id: Mapped[int] = mapped_column(fk("trust_domain.id"))
    trust_domain: Mapped["TrustDomain"] = relationship()


class _VolumeMount(Bookkeeping):
    natural_key: ClassVar[tuple[str, ...]] = ("service_instance", "mount_path")

    mount_path: Mapped[str] = mapped_column(sa.String(1024))
    sub_path: Mapped[str | None] = mapped_column(sa.String(1024))

    def validate(self, session: Session) -> None:
        if not self.mount_path or not self.mount_path.startswith("/"):
            raise ValidationError(type(self).__name__, "mount_path", f"{self.mount_path!r} is not an absolute path")


class KubernetesConfigVolumeMount(_VolumeMount, Model):
    __tablename__ = "kubernetes_config_volume_mount"
    __table_args__ = (sa.UniqueConstraint("service_instance_id", "mount_path"),)

    config_id: Mapped[int] = mapped_column(fk("kubernetes_config_map.id"))
    service_instance_id: Mapped[int] = mapped_column(fk("service_instance.id"))
    config: Mapped["KubernetesConfigMap"] = relationship()
    service_instance: Mapped["KubernetesServiceInstance"] = relationship()
    # The original documents this relation as ``secret`` ("Relation to ConfigMap to be mounted").
    secret = synonym("config")
    aliases: ClassVar[dict[str, str]] = {"secret": "config"}

    def validate(self, session: Session) -> None:
        super().validate(session)
        require(self, "config", "service_instance")


class KubernetesSecretVolumeMount(_VolumeMount, Model):
    __tablename__ = "kubernetes_secret_volume_mount"
    __table_args__ = (sa.UniqueConstraint("service_instance_id", "mount_path"),)

    secret_id: Mapped[int] = mapped_column(fk("kubernetes_secret.id"))
    service_instance_id: Mapped[int] = mapped_column(fk("service_instance.id"))
    secret: Mapped["KubernetesSecret"] = relationship()
    service_instance: Mapped["KubernetesServiceInstance"] = relationship()

    def validate(self, session: Session) -> None:
        super().validate(session)
        require(self, "secret", "service_instance")
