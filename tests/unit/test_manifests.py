"""What rows become (provisioning/manifests.py), from rows built in memory."""

from __future__ import annotations

import base64

from kuberaven.model import (
    Image,
    KubernetesConfigMap,
    KubernetesConfigVolumeMount,
    KubernetesSecret,
    KubernetesServiceInstance,
    Principal,
    Service,
    ServicePort,
    Slice,
    TrustDomain,
)
from kuberaven.provisioning import manifests
from kuberaven.provisioning.manifests import label_value


def test_label_values_stay_when_valid_and_stay_distinct_when_cleaned() -> None:
    assert label_value("mysite_demo1") == "mysite_demo1"
    cleaned = {label_value("a b"), label_value("a/b"), label_value("x" * 80)}
    assert len(cleaned) == 3
    assert all(len(v) <= 63 and manifests._LABEL_VALUE.match(v) for v in cleaned)


def _pod_row() -> KubernetesServiceInstance:
    td = TrustDomain(id=1, name="demo")
    service = Service(id=2, name="web", trust_domain=td)
    principal = Principal(id=3, name="runner", trust_domain=td)
    slice_ = Slice(id=4, name="web slice", trust_domain=td, principal=principal, service=service)
    image = Image(id=5, name="registry:5000/team/web", tag="1.2")
    return KubernetesServiceInstance(id=6, name="web-0", slice=slice_, image=image, trust_domain=td)


def test_a_pod_gets_one_volume_per_mount_and_labels_that_services_select() -> None:
    row = _pod_row()
    config = KubernetesConfigMap(id=7, name="settings", trust_domain=row.trust_domain)
    mounts = [KubernetesConfigVolumeMount(id=i, config=config, mount_path=f"/etc/{i}") for i in (8, 9)]
    pod = manifests.pod(row, mounts)
    volumes = [v["name"] for v in pod["spec"]["volumes"]]
    assert volumes == ["config-8", "config-9"]  # the same ConfigMap twice, no collision
    assert pod["spec"]["serviceAccountName"] == "runner"
    container = pod["spec"]["containers"][0]
    assert (container["name"], container["image"]) == ("web", "registry:5000/team/web:1.2")
    labels = pod["metadata"]["labels"]
    assert labels[manifests.SERVICE_LABEL] == "web" and labels[manifests.MANAGED_BY] == "kuberaven"
    assert pod["metadata"]["annotations"][manifests.ROW_ANNOTATION] == "KubernetesServiceInstance/6"
    assert row.slice is not None and row.slice.service is not None
    service = manifests.service(row.slice.service, [ServicePort(id=1, name="", internal_port=80, protocol="TCP")])
    assert service["spec"]["type"] == "ClusterIP"  # no external port
    assert service["spec"]["selector"] == {manifests.SERVICE_LABEL: "web"}
    assert service["spec"]["ports"] == [{"name": "tcp-80", "protocol": "TCP", "port": 80, "targetPort": 80}]


def test_a_secret_is_encoded_and_ownership_is_read_from_label_and_annotation() -> None:
    td = TrustDomain(id=1, name="demo")
    secret = manifests.secret(KubernetesSecret(id=3, name="creds", trust_domain=td, data={"password": "s3cret"}))
    assert base64.b64decode(secret["data"]["password"]) == b"s3cret"
    assert manifests.is_ours(secret, "KubernetesSecret/3")
    assert not manifests.is_ours(secret, "KubernetesSecret/4")
    assert not manifests.is_ours({"metadata": {"name": "creds"}})
