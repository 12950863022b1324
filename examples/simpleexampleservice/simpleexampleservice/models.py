"""The plugin's own model: one table, with kuberaven's bookkeeping fields."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column, relationship

from kuberaven.model import Model, TrustDomain, ValidationError
from kuberaven.model.base import Bookkeeping
from kuberaven.model.tables import DNS_LABEL

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


class SimpleExampleServiceInstance(Bookkeeping, Model):
    __tablename__ = "simpleexample_service_instance"
    __table_args__ = (sa.UniqueConstraint("trust_domain_id", "name"),)
    natural_key = ("trust_domain", "name")
    policed_deletes: ClassVar[bool] = True  # handle_delete needs a tombstone

    name: Mapped[str] = mapped_column(sa.String(50))
    trust_domain_id: Mapped[int] = mapped_column(sa.ForeignKey("trust_domain.id", ondelete="CASCADE"))
    message: Mapped[str] = mapped_column(sa.Text, default="")

    trust_domain: Mapped[TrustDomain] = relationship()

    def validate(self, session: Session) -> None:
        if not self.name or len(self.name) > 50 or not DNS_LABEL.match(self.name):
            raise ValidationError(type(self).__name__, "name", f"{self.name!r} is not a DNS label of at most 50")
        if self.trust_domain is None and self.trust_domain_id is None:
            raise ValidationError(type(self).__name__, "trust_domain", "is required")
