"""The original's documents followed as written: their Python example, the same objects as YAML, and their rules
through Python, ``apply -f`` and REST, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
import sqlalchemy as sa

import kuberaven.model as model
from kuberaven.model import Database
from kuberaven.model.applying import apply_documents
from kuberaven.model.base import table_of
from kuberaven.model.documents import model_for, resolve
from kuberaven.model.parsing import parse_documents
from kuberaven.web.app import create_app
from tests.helpers import kuberaven, serving

# The Kubernetes Service documents' example, verbatim (the same text in both versions of the page, the
# second only fencing it as ```python); its one-space indentation is the original's.
SEED_EXAMPLE = """\
# Create a new Trust Domain for the demo
t=TrustDomain(name="demo-trust", owner=KubernetesService.objects.first())
t.save()

# Use an existing image if one is available, otherwise create a new image.
existing_images=Image.objects.filter(name="k8s.gcr.io/pause-amd64")
if existing_images:
 img = existing_images[0]
else:
 img=Image(name="k8s.gcr.io/pause-amd64", tag="3.0")
 img.save()

# Create a new Slice for the demo
s=Slice(name="mysite_demo1", site=Site.objects.first(), trust_domain=t)
s.save()

# Create a KubernetesServiceInstance that will instantiate a pod
i=KubernetesServiceInstance(name="demo-pod", slice=s, image=img, owner=KubernetesService.objects.first(), xos_managed=True)
i.save()
"""  # noqa: E501 (the documents' own text)

# The same objects, and the optional ones the documents list (ConfigMap, Secret and their mounts, a Principal,
# an XOS service), as YAML with exactly the documents' field names and values: the ConfigMap mount's relation
# is ``secret``, its kind KubernetesConfigMapVolumeMount, data a JSON-encoded dictionary.
SEED_YAML = """\
- kind: TrustDomain
  name: demo-trust
  owner: kubernetes
- kind: Principal
  name: demo-robot
  trust_domain: demo-trust
- kind: Image
  name: k8s.gcr.io/pause-amd64
  tag: "3.0"
- kind: Slice
  name: mysite_demo1
  site: mysite
  trust_domain: demo-trust
  principal: demo-trust/demo-robot
- kind: KubernetesServiceInstance
  name: demo-pod
  owner: kubernetes
  slice: mysite_demo1
  image: k8s.gcr.io/pause-amd64:3.0
  xos_managed: true
- kind: KubernetesConfigMap
  name: demo-config
  trust_domain: demo-trust
  data: '{"greeting": "hello"}'
- kind: KubernetesSecret
  name: demo-secret
  trust_domain: demo-trust
  data: '{"password": "hunter2"}'
- kind: KubernetesConfigMapVolumeMount
  secret: demo-trust/demo-config
  service_instance: demo-trust/demo-pod
  mount_path: /etc/demo
  sub_path: greeting
- kind: KubernetesSecretVolumeMount
  secret: demo-trust/demo-secret
  service_instance: demo-trust/demo-pod
  mount_path: /etc/secret
- kind: KubernetesResourceInstance
  name: demo-resources
  resource_definition: |
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: demo-extra}
  kubectl_state: created
- kind: Service
  name: SimpleExampleService
"""


def test_the_python_example_runs_as_written(database_url: str) -> None:
    script = f"from kuberaven.model import *\nconnect({database_url!r})\n{SEED_EXAMPLE}"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    listed = json.loads(kuberaven("get", "KubernetesServiceInstance", "-o", "json", "--db", database_url).stdout)
    assert [(d["name"], d["trust_domain"], d["slice"], d["image"], d["xos_managed"]) for d in listed] == [
        ("demo-pod", "kubernetes/demo-trust", "kubernetes/demo-trust/mysite_demo1", "k8s.gcr.io/pause-amd64:3.0", True)
    ]
    # Running it again finds the image but refuses a second trust domain of the same name.
    again = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "TrustDomain: 'demo-trust' already exists" in again.stderr


def test_the_same_objects_apply_as_yaml_with_the_documents_field_names(database_url: str, tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(SEED_YAML)
    applied = kuberaven("apply", "-f", str(seed), "--db", database_url)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.count(" created") == 11, applied.stdout
    again = kuberaven("apply", "-f", str(seed), "--db", database_url)
    assert again.returncode == 0 and again.stdout.count(" unchanged") == 11, again.stdout + again.stderr

    def get(kind: str) -> list[dict[str, object]]:
        return json.loads(kuberaven("get", kind, "-o", "json", "--db", database_url).stdout)

    [mount] = get("KubernetesConfigMapVolumeMount")
    assert mount["kind"] == "KubernetesConfigVolumeMount" and mount["config"] == "kubernetes/demo-trust/demo-config"
    assert [c["data"] for c in get("KubernetesConfigMap")] == [{"greeting": "hello"}]
    assert [s["data"] for s in get("KubernetesSecret")] == [{"password": "<hidden>"}]
    assert [r["kubectl_state"] for r in get("KubernetesResourceInstance")] == ["CREATED"]
    assert "SimpleExampleService" in [s["name"] for s in get("Service")]


@pytest.fixture
def api(database: Database) -> Iterator[httpx.Client]:
    with serving(create_app(database)) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def _seed(database: Database) -> None:
    with database.session() as session:
        apply_documents(session, parse_documents(SEED_YAML))


def test_rest_takes_the_documents_names_and_refuses_observed_fields(api: httpx.Client, database: Database) -> None:
    _seed(database)
    mount = {
        "kind": "KubernetesConfigMapVolumeMount",
        "secret": "demo-trust/demo-config",
        "service_instance": "demo-trust/demo-pod",
        "mount_path": "/etc/more",
    }
    created = api.post("/api/v1/KubernetesConfigMapVolumeMount", json=mount)
    assert created.status_code == 201, created.text
    assert created.json()["config"] == "kubernetes/demo-trust/demo-config"
    filtered = api.get("/api/v1/KubernetesConfigVolumeMount", params={"secret": "demo-trust/demo-config"}).json()
    assert filtered["total"] == 2
    both = {**mount, "mount_path": "/etc/both", "config": "demo-trust/demo-config"}
    refused = api.post("/api/v1/KubernetesConfigVolumeMount", json=both)
    assert refused.status_code == 422
    assert "KubernetesConfigVolumeMount.config: is given twice" in refused.json()["detail"]

    config = api.patch("/api/v1/KubernetesConfigMap/demo-trust/demo-config", json={"data": '{"greeting": "hi"}'})
    assert config.status_code == 200 and config.json()["data"] == {"greeting": "hi"}
    not_json = api.patch("/api/v1/KubernetesConfigMap/demo-trust/demo-config", json={"data": "greeting=hi"})
    assert not_json.status_code == 422 and "not JSON-encoded" in not_json.json()["detail"]
    state = api.patch("/api/v1/KubernetesResourceInstance/demo-resources", json={"kubectl_state": "Updated"})
    assert state.status_code == 200 and state.json()["kubectl_state"] == "UPDATED"

    for field, value in [
        ("pod_ip", "10.9.9.9"),
        ("phase", "Running"),
        ("ready", True),
        ("restart_count", 3),
        ("containers", []),
        ("node", "n1"),
        ("pod_ips", ["10.9.9.9"]),
        ("uid", "u"),
    ]:
        answer = api.patch("/api/v1/KubernetesServiceInstance/demo-trust/demo-pod", json={field: value})
        assert answer.status_code == 422, (field, answer.text)
        assert f"KubernetesServiceInstance.{field}: is observed from Kubernetes" in answer.json()["detail"]
    assert api.get("/api/v1/KubernetesServiceInstance/demo-trust/demo-pod").json()["pod_ip"] is None


def test_rest_refuses_a_reference_cycle_and_a_trust_domain_owned_by_any_service(
    api: httpx.Client, database: Database
) -> None:
    _seed(database)
    front = api.post("/api/v1/Service", json={"name": "front", "trust_domain": "kubernetes/default"})
    assert front.status_code == 201, front.text
    cycle = api.patch("/api/v1/TrustDomain/kubernetes/default", json={"owner": "kubernetes/default/front"})
    assert cycle.status_code == 422, cycle.text
    assert "TrustDomain.owner: its references make a cycle: TrustDomain 'default' → Service 'front'" in cycle.text
    xos = api.patch("/api/v1/TrustDomain/kubernetes/default", json={"owner": "SimpleExampleService"})
    assert xos.status_code == 422
    assert "must be a KubernetesService (a cluster), not Service 'SimpleExampleService'" in xos.json()["detail"]
    assert api.get("/api/v1/TrustDomain").status_code == 200
    assert api.get("/api/v1/TrustDomain/kubernetes/default").json()["owner"] == "kubernetes"


BAD_NAMES = [
    ("Slice", {"site": "mysite", "trust_domain": "demo-trust"}, "a/b", "'/'"),
    ("Slice", {"site": "mysite", "trust_domain": "demo-trust"}, "..", "is not a name"),
    ("Slice", {"site": "mysite", "trust_domain": "demo-trust"}, "evil\u202eexe", "U+202E"),
    ("Slice", {"site": "mysite", "trust_domain": "demo-trust"}, "<script>", "'<'"),
    ("Site", {}, "my site", "U+0020 (SPACE)"),
    ("Service", {}, "A" * 31, "at most 30"),
    ("Service", {"trust_domain": "demo-trust"}, "SimpleExampleService", "not a valid Kubernetes Service name"),
    ("TrustDomain", {"owner": "kubernetes"}, "Demo", "not a valid namespace name"),
    ("KubernetesConfigMap", {"trust_domain": "demo-trust"}, "a_b", "not a valid object name"),
    ("KubernetesServiceInstance", {"slice": "mysite_demo1", "image": "k8s.gcr.io/pause-amd64:3.0"}, "a/b", "pod name"),
    ("KubernetesResourceInstance", {}, "x\ny", "U+000A"),
]


@pytest.mark.parametrize(("kind", "fields", "name", "says"), BAD_NAMES, ids=lambda v: str(v)[:24])
def test_names_are_held_to_the_rule_of_what_they_become(
    api: httpx.Client, database: Database, kind: str, fields: dict[str, str], name: str, says: str
) -> None:
    _seed(database)
    answer = api.post(f"/api/v1/{kind}", json={"name": name, **fields})
    assert answer.status_code == 422 and says in answer.json()["detail"], answer.text
    document = json.dumps([{"kind": kind, "name": name, **fields}])
    applied = api.post("/api/v1/apply", content=document, headers={"Content-Type": "application/json"})
    assert applied.status_code == 422 and says in applied.json()["detail"], applied.text
    model.connect(database.url.render_as_string(hide_password=False))
    target = model_for(kind)
    with database.session() as session:
        references = {f: resolve(session, getattr(target, f).property.mapper.class_, v) for f, v in fields.items()}
    with pytest.raises(model.ValidationError, match=f"{target.__name__}.name"):
        target(name=name, **references).save()


def test_python_api_takes_the_documents_names_and_keeps_their_rules(database: Database) -> None:
    model.connect(database.url.render_as_string(hide_password=False))
    cluster = model.KubernetesService.objects.first()
    td = model.TrustDomain(name="demo-trust", owner=cluster)
    td.save()
    site = model.Site.objects.first()
    image = model.Image(name="k8s.gcr.io/pause-amd64", tag="3.0")
    image.save()
    slice_ = model.Slice(name="mysite_demo1", site=site, trust_domain=td)
    slice_.save()
    pod = model.KubernetesServiceInstance(name="demo-pod", slice=slice_, image=image, owner=cluster, xos_managed=True)
    pod.save()

    config = model.KubernetesConfigMap(name="demo-config", trust_domain=td, data=json.dumps({"greeting": "hello"}))
    config.save()
    assert model.KubernetesConfigMap.objects.get(name="demo-config").data == {"greeting": "hello"}
    with pytest.raises(model.ValidationError, match=r"KubernetesSecret\.data: is JSON of a list"):
        model.KubernetesSecret(name="s", trust_domain=td, data="[1]")
    mount = model.KubernetesConfigMapVolumeMount(secret=config, service_instance=pod, mount_path="/etc/demo")
    mount.save()
    assert model.KubernetesConfigVolumeMount.objects.get(secret=config).config.name == "demo-config"

    resources = model.KubernetesResourceInstance(name="demo-resources", kubectl_state="deleted")
    resources.save()
    assert model.KubernetesResourceInstance.objects.get(name="demo-resources").kubectl_state == "DELETED"
    with pytest.raises(model.ValidationError, match=r"'gone' is not CREATED \| UPDATED \| DELETED"):
        resources.kubectl_state = "gone"

    model.Service(name="SimpleExampleService").save()  # an XOS service: no namespace, no Kubernetes name rules
    with pytest.raises(model.ValidationError, match="at most 30"):
        model.Service(name="S" * 31).save()

    # Observed fields: not the user's to write, on a new row or a stored one; other fields stay writable.
    with pytest.raises(model.ValidationError, match=r"KubernetesServiceInstance\.pod_ip: is observed"):
        model.KubernetesServiceInstance(name="p2", slice=slice_, image=image, pod_ip="10.0.0.9").save()
    table = table_of(model.KubernetesServiceInstance)
    with database.engine.begin() as db:  # as the inventory writes it (SQLAlchemy Core)
        db.execute(table.update().where(table.c.id == pod.id).values(pod_ip="10.1.0.5", phase="Running"))
    pod = model.KubernetesServiceInstance.objects.get(name="demo-pod")
    pod.pod_ip = "10.0.0.9"
    with pytest.raises(model.ValidationError, match=r"KubernetesServiceInstance\.pod_ip: is observed"):
        pod.save()
    pod = model.KubernetesServiceInstance.objects.get(name="demo-pod")
    assert pod.pod_ip == "10.1.0.5"
    pod.need_event = True
    pod.save()
    assert model.KubernetesServiceInstance.objects.get(name="demo-pod").phase == "Running"


def test_python_api_refuses_a_cycle_and_a_trust_domain_owned_by_any_service(database: Database) -> None:
    model.connect(database.url.render_as_string(hide_password=False))
    default = model.TrustDomain.objects.get(name="default")
    front = model.Service(name="front", trust_domain=default)
    front.save()
    default.owner = front
    with pytest.raises(model.ValidationError, match=r"TrustDomain\.owner: its references make a cycle"):
        default.save()
    xos = model.Service(name="SimpleExampleService")
    xos.save()
    with pytest.raises(model.ValidationError, match="must be a KubernetesService"):
        model.TrustDomain(name="xos", owner=xos).save()
    cluster = model.KubernetesService.objects.first()
    assert cluster is not None
    cluster.trust_domain = default
    with pytest.raises(model.ValidationError, match=r"KubernetesService\.trust_domain: a cluster does not live"):
        cluster.save()
    assert [td.owner.name for td in model.TrustDomain.objects.all()] == ["kubernetes"]


def test_the_upgrade_shows_stored_kubectl_states_in_the_documented_case(database_url: str) -> None:
    db = Database(database_url)
    try:
        db.upgrade("0003")
        instances = sa.table(
            "service_instance",
            *(
                sa.column(c)
                for c in (
                    "leaf_model_name",
                    "name",
                    "kubectl_state",
                    "created",
                    "updated",
                    "backend_status",
                    "backend_code",
                    "policy_code",
                    "xos_managed",
                    "deleted",
                    "backend_need_delete",
                    "no_sync",
                    "no_policy",
                    "adopt",
                )
            ),
        )
        now = model.utcnow().replace(tzinfo=None)
        with db.engine.begin() as connection:
            for name, state in [("a", "created"), ("b", "deleted"), ("c", None)]:
                connection.execute(
                    instances.insert().values(
                        leaf_model_name="KubernetesResourceInstance",
                        name=name,
                        kubectl_state=state,
                        created=now,
                        updated=now,
                        backend_status="",
                        backend_code=0,
                        policy_code=0,
                        xos_managed=True,
                        deleted=False,
                        backend_need_delete=False,
                        no_sync=False,
                        no_policy=False,
                        adopt=False,
                    )
                )
        db.upgrade()
        with db.session() as session:
            rows = session.scalars(sa.select(model.KubernetesResourceInstance).order_by(sa.text("name")))
            assert [r.kubectl_state for r in rows] == ["CREATED", "DELETED", None]
    finally:
        db.dispose()
