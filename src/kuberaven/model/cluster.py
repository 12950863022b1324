"""The tables of what a cluster is made of (model/): clusters, namespaces, services, slices, images.

    KubernetesService (a cluster) ──► TrustDomain (a namespace) ──► Principal (a service account)
                                                                ──► Slice (what a controller runs)
    Service (+ ServicePort), Site, Image ◄── workloads.py's instances point at these

The models and fields are the original XOS Kubernetes Service's
(XOS's kubernetes-service models), with its identity faults fixed:

* a Principal is (trust domain, name); a TrustDomain is (owner cluster, name);
* a Slice is (trust domain, name); an Image is (name, tag, digest);
* any number of KubernetesServices (clusters), each with kubeconfig/context.

``Service`` uses single-table inheritance on ``leaf_model_name`` (XOS's own
name for the concrete model), so ``Service.objects`` still returns every
kind of service, clusters included.
"""

from typing import ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, Session, mapped_column, relationship

from .address_space import check_address_space
from .base import Bookkeeping, Model, Observed
from .errors import ValidationError
from .fields import check_name, check_plain_name, fk, partial_index, require
from .names import DNS_1035_LABEL, DNS_LABEL, DNS_SUBDOMAIN, LABEL_LIMIT, SUBDOMAIN_LIMIT, XOS_SERVICE_NAME_LIMIT

PROTOCOLS = ("TCP", "UDP", "SCTP")


class Site(Bookkeeping, Model):
    __tablename__ = "site"

    name: Mapped[str] = mapped_column(sa.String(200), unique=True)
    login_base: Mapped[str | None] = mapped_column(sa.String(50))
    abbreviated_name: Mapped[str | None] = mapped_column(sa.String(80))
    site_url: Mapped[str | None] = mapped_column(sa.String(512))
    enabled: Mapped[bool] = mapped_column(default=True)

    def validate(self, session: Session) -> None:
        check_plain_name(self)


class Service(Bookkeeping, Observed, Model):
    """A service; with a trust domain it is (or mirrors) a Kubernetes Service in that namespace."""

    __tablename__ = "service"
    __table_args__ = (
        partial_index("uq_service_cluster_scoped_name", "name", unique=True, where="trust_domain_id IS NULL"),
        sa.UniqueConstraint("trust_domain_id", "name"),
    )
    natural_key: ClassVar[tuple[str, ...]] = ("trust_domain", "name")

    leaf_model_name: Mapped[str] = mapped_column(sa.String(64))
    name: Mapped[str] = mapped_column(sa.String(63))
    description: Mapped[str | None] = mapped_column(sa.Text)
    enabled: Mapped[bool] = mapped_column(default=True)
    kind: Mapped[str] = mapped_column(sa.String(30), default="generic")
    trust_domain_id: Mapped[int | None] = mapped_column(
        fk("trust_domain.id", use_alter=True, name="fk_service_trust_domain_id_trust_domain")
    )
    # KubernetesService only: how to reach that cluster (None: the default kubeconfig / in-cluster).
    kubeconfig: Mapped[str | None] = mapped_column(sa.String(1024))
    context: Mapped[str | None] = mapped_column(sa.String(253))
    # KubernetesService only: the cluster's own address space in the network translation
    # (None: the network_* setting), so that several clusters need not share one.
    pod_cidr: Mapped[str | None] = mapped_column(sa.String(49))
    service_cidr: Mapped[str | None] = mapped_column(sa.String(49))
    namespace_pool: Mapped[str | None] = mapped_column(sa.String(49))
    external_network: Mapped[str | None] = mapped_column(sa.String(255))
    openstack_project: Mapped[str | None] = mapped_column(sa.String(255))

    trust_domain: Mapped["TrustDomain | None"] = relationship(foreign_keys=[trust_domain_id])
    ports: Mapped[list["ServicePort"]] = relationship(
        back_populates="service", cascade="all, delete-orphan", passive_deletes=True
    )

    __mapper_args__ = {
        "polymorphic_on": "leaf_model_name",
        "polymorphic_identity": "Service",
    }

    def validate(self, session: Session) -> None:
        if self.trust_domain is None and self.trust_domain_id is None:
            # No namespace: an XOS service (SimpleExampleService), never a Kubernetes Service.
            check_plain_name(self, XOS_SERVICE_NAME_LIMIT)
        else:
            check_name(self, DNS_1035_LABEL, LABEL_LIMIT, "Kubernetes Service name (a-z, 0-9, '-'; a letter first)")


class KubernetesService(Service):
    """One Kubernetes cluster. Trust domains, and through them everything else, belong to one."""

    natural_key: ClassVar[tuple[str, ...]] = ("name",)
    __mapper_args__ = {"polymorphic_identity": "KubernetesService"}

    def validate(self, session: Session) -> None:
        super().validate(session)
        if self.trust_domain_id is not None or self.trust_domain is not None:
            raise ValidationError("KubernetesService", "trust_domain", "a cluster does not live in a namespace")
        check_address_space(self, session)


class ServicePort(Bookkeeping, Model):
    __tablename__ = "service_port"
    __table_args__ = (sa.UniqueConstraint("service_id", "name"),)
    natural_key: ClassVar[tuple[str, ...]] = ("service", "name")

    name: Mapped[str] = mapped_column(sa.String(63), default="")
    external_port: Mapped[int | None]
    internal_port: Mapped[int | None]
    protocol: Mapped[str] = mapped_column(sa.String(8), default="TCP")
    service_id: Mapped[int] = mapped_column(fk("service.id"))

    service: Mapped["Service"] = relationship(back_populates="ports")

    def validate(self, session: Session) -> None:
        require(self, "service")
        service = self.service or session.get(Service, self.service_id)
        if self.name and service is not None and (service.trust_domain_id or service.trust_domain) is not None:
            check_name(self, DNS_LABEL, LABEL_LIMIT, "port name of a Kubernetes Service")
        elif self.name:
            check_plain_name(self)
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
    natural_key: ClassVar[tuple[str, ...]] = ("owner", "name")

    name: Mapped[str] = mapped_column(sa.String(63))
    owner_id: Mapped[int] = mapped_column(fk("service.id"))

    owner: Mapped["Service"] = relationship(foreign_keys=[owner_id])

    def validate(self, session: Session) -> None:
        check_name(self, DNS_LABEL, LABEL_LIMIT, "namespace name (lower-case letters, digits, '-')")
        require(self, "owner")
        owner = self.owner or session.get(Service, self.owner_id)
        if owner is not None and not isinstance(owner, KubernetesService):
            what = f"{type(owner).__name__} {owner.name!r}"
            raise ValidationError("TrustDomain", "owner", f"must be a KubernetesService (a cluster), not {what}")


class Principal(Bookkeeping, Observed, Model):
    """A service account in one trust domain."""

    __tablename__ = "principal"
    __table_args__ = (sa.UniqueConstraint("trust_domain_id", "name"),)
    natural_key: ClassVar[tuple[str, ...]] = ("trust_domain", "name")

    name: Mapped[str] = mapped_column(sa.String(253))
    trust_domain_id: Mapped[int] = mapped_column(fk("trust_domain.id"))

    trust_domain: Mapped["TrustDomain"] = relationship()

    def validate(self, session: Session) -> None:
        check_name(self, DNS_SUBDOMAIN, SUBDOMAIN_LIMIT, "service account name")
        require(self, "trust_domain")


class Slice(Bookkeeping, Model):
    """A group of instances: what a controller (Deployment, StatefulSet, ...) runs."""

    __tablename__ = "slice"
    __table_args__ = (sa.UniqueConstraint("trust_domain_id", "name"),)
    natural_key: ClassVar[tuple[str, ...]] = ("trust_domain", "name")

    name: Mapped[str] = mapped_column(sa.String(253))
    site_id: Mapped[int] = mapped_column(fk("site.id"))
    service_id: Mapped[int | None] = mapped_column(fk("service.id", "SET NULL"))
    trust_domain_id: Mapped[int] = mapped_column(fk("trust_domain.id"))
    principal_id: Mapped[int | None] = mapped_column(fk("principal.id", "SET NULL"))
    controller_kind: Mapped[str | None] = mapped_column(sa.String(63))
    controller_replica_count: Mapped[int | None]
    controller_uid: Mapped[str | None] = mapped_column(sa.String(64))
    description: Mapped[str | None] = mapped_column(sa.Text)
    enabled: Mapped[bool] = mapped_column(default=True)
    max_instances: Mapped[int] = mapped_column(default=10)

    site: Mapped["Site"] = relationship()
    service: Mapped["Service | None"] = relationship(foreign_keys=[service_id])
    trust_domain: Mapped["TrustDomain"] = relationship()
    principal: Mapped["Principal | None"] = relationship()

    def validate(self, session: Session) -> None:
        check_plain_name(self)  # a slice has no Kubernetes object of its own
        require(self, "site", "trust_domain")


class Image(Bookkeeping, Model):
    __tablename__ = "image"
    __table_args__ = (sa.UniqueConstraint("name", "tag", "digest"),)
    natural_key: ClassVar[tuple[str, ...]] = ("name", "tag", "digest")

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
