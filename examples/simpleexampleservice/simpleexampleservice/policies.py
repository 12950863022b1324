"""The model policy: an instance row → a ConfigMap with its message + a pod mounting it."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from kuberaven.model import (
    Image,
    KubernetesConfigMap,
    KubernetesConfigVolumeMount,
    KubernetesServiceInstance,
    Site,
    Slice,
    SyncTombstone,
    TrustDomain,
)
from kuberaven.provisioning.model_policies import ModelPolicy, put

from .models import SimpleExampleServiceInstance

IMAGE = ("httpd", "2.4")
HTDOCS = "/usr/local/apache2/htdocs"


def _find(session: Session, model: type[Any], **fields: Any) -> Any:
    return session.scalar(sa.select(model).filter_by(**fields))


class SimpleExampleServiceInstancePolicy(ModelPolicy):
    model = SimpleExampleServiceInstance

    def handle_update(self, session: Session, row: SimpleExampleServiceInstance) -> None:
        td = row.trust_domain
        data = {"index.html": row.message}
        config = _find(session, KubernetesConfigMap, trust_domain_id=td.id, name=f"{row.name}-message")
        if config is None:
            config = put(session, KubernetesConfigMap(name=f"{row.name}-message", trust_domain=td, data=data))
        elif config.data != data:
            config.data = data
            put(session, config)
        image = _find(session, Image, name=IMAGE[0], tag=IMAGE[1], digest="")
        if image is None:
            image = put(session, Image(name=IMAGE[0], tag=IMAGE[1]))
        slice_ = _find(session, Slice, trust_domain_id=td.id, name=f"simpleexample-{row.name}")
        if slice_ is None:
            site = session.scalar(sa.select(Site).order_by(Site.id).limit(1))
            slice_ = put(session, Slice(name=f"simpleexample-{row.name}", site=site, trust_domain=td))
        instance = _find(session, KubernetesServiceInstance, trust_domain_id=td.id, name=row.name)
        if instance is None:
            instance = put(session, KubernetesServiceInstance(name=row.name, slice=slice_, image=image))
        mount = _find(session, KubernetesConfigVolumeMount, service_instance_id=instance.id, mount_path=HTDOCS)
        if mount is None:
            put(session, KubernetesConfigVolumeMount(config=config, service_instance=instance, mount_path=HTDOCS))

    def handle_delete(self, session: Session, tombstone: SyncTombstone) -> None:
        td = _find(session, TrustDomain, owner_id=tombstone.cluster_id, name=tombstone.namespace)
        if td is None:
            return  # the namespace went, and everything in it
        # The slice takes its instance and mounts with it; the sync loop deletes the pod and the ConfigMap.
        for model, name in (
            (Slice, f"simpleexample-{tombstone.name}"),
            (KubernetesConfigMap, f"{tombstone.name}-message"),
        ):
            found = _find(session, model, trust_domain_id=td.id, name=name)
            if found is not None:
                session.delete(found)
