"""The data model on SQLite and PostgreSQL: the seed's Python API, apply -f, get, delete, db upgrade."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

import kuberaven.model as model
from kuberaven.model import Database
from kuberaven.model.database import MIGRATIONS, script_heads
from tests.helpers import kuberaven

SEED = """
t=TrustDomain(name="demo-trust", owner=KubernetesService.objects.first()); t.save()
existing_images=Image.objects.filter(name="k8s.gcr.io/pause-amd64")
if existing_images:
    img=existing_images[0]
else:
    img=Image(name="k8s.gcr.io/pause-amd64", tag="3.0"); img.save()
s=Slice(name="mysite_demo1", site=Site.objects.first(), trust_domain=t); s.save()
i=KubernetesServiceInstance(name="demo-pod", slice=s, image=img, owner=KubernetesService.objects.first(), xos_managed=True); i.save()
"""  # noqa: E501 (the seed's own text)


def test_the_seed_example_runs_with_an_import_and_a_connect_line(database_url: str) -> None:
    script = f"from kuberaven.model import *\nconnect({database_url!r})\n{SEED}"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    listed = json.loads(kuberaven("get", "KubernetesServiceInstance", "-o", "json", "--db", database_url).stdout)
    assert [(d["name"], d["trust_domain"], d["slice"], d["image"], d["xos_managed"]) for d in listed] == [
        ("demo-pod", "kubernetes/demo-trust", "kubernetes/demo-trust/mysite_demo1", "k8s.gcr.io/pause-amd64:3.0", True)
    ]
    # Running it again finds the image but refuses a second trust domain of the same name.
    again = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "TrustDomain: 'demo-trust' already exists" in again.stderr


def test_python_api_queries_and_validation(database: Database) -> None:
    model.connect(database.url.render_as_string(hide_password=False))
    cluster = model.KubernetesService.objects.get(name="kubernetes")
    assert model.TrustDomain.objects.filter(owner=cluster, name="default").count() == 1
    assert model.Site.objects.first() is not None
    with pytest.raises(model.ValidationError, match=r"Slice\.name: 'has space'"):
        model.Slice(
            name="has space", site=model.Site.objects.first(), trust_domain=model.TrustDomain.objects.first()
        ).save()
    with pytest.raises(model.ValidationError, match=r"ServicePort\.internal_port"):
        service = model.Service(name="svc")
        service.save()
        model.ServicePort(service=service, internal_port=70000).save()
    with pytest.raises(model.ValidationError, match=r"KubernetesService\.context: contains a NUL character"):
        model.KubernetesService(name="nul", kubeconfig="/etc/k", context="a\x00").save()  # no stored text
    with pytest.raises(model.DoesNotExist):
        model.Image.objects.get(name="nope")
    with pytest.raises(model.ValidationError, match="no such field"):
        model.Image.objects.filter(colour="red")
    other = model.KubernetesService(name="edge", kubeconfig="/etc/edge.kubeconfig", context="edge")
    other.save()
    assert {c.name for c in model.KubernetesService.objects.all()} == {"kubernetes", "edge"}
    model.TrustDomain(name="default", owner=other).save()  # same namespace name, another cluster
    assert model.TrustDomain.objects.filter(name="default").count() == 2


GOOD = """\
- kind: TrustDomain
  name: shop
  owner: kubernetes
- kind: Image
  name: nginx:1.25
- kind: Slice
  name: web
  site: mysite
  trust_domain: shop
- kind: KubernetesServiceInstance
  name: web-0
  slice: web
  image: nginx:1.25
- kind: KubernetesSecret
  name: creds
  trust_domain: shop
  data: {password: hunter2}
"""

BAD = (
    GOOD
    + """\
- kind: Site
  name: newsite
- kind: Slice
  name: broken
  site: mysite
  trust_domain: no-such-namespace
"""
)


def test_apply_creates_updates_and_rejects_a_bad_file_whole(database_url: str, tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(BAD)
    created = kuberaven("apply", "-f", str(good), "--db", database_url)
    assert created.returncode == 0, created.stderr
    assert "KubernetesServiceInstance web-0 created" in created.stdout
    assert "Slice web unchanged" in kuberaven("apply", "-f", str(good), "--db", database_url).stdout

    rejected = kuberaven("apply", "-f", str(bad), "--db", database_url)
    assert rejected.returncode == 1
    assert "bad.yaml:20:" in rejected.stderr and "no-such-namespace" in rejected.stderr, rejected.stderr
    names = [d["name"] for d in json.loads(kuberaven("get", "Site", "-o", "json", "--db", database_url).stdout)]
    assert "newsite" not in names, "nothing of a rejected file is stored"

    broken_yaml = kuberaven("apply", "-f", "-", "--db", database_url, stdin="- kind: Slice\n  name: [unclosed\n")
    assert broken_yaml.returncode == 1 and "invalid YAML" in broken_yaml.stderr
    too_long = kuberaven("apply", "-f", "-", "--db", database_url, stdin=f"- kind: Site\n  name: {'x' * 300}\n")
    assert too_long.returncode == 1 and "at most 200" in too_long.stderr
    slice_with_text_count = "- kind: Slice\n  name: w2\n  site: mysite\n  trust_domain: shop\n  max_instances: many\n"
    wrong_type = kuberaven("apply", "-f", "-", "--db", database_url, stdin=slice_with_text_count)
    assert wrong_type.returncode == 1 and "max_instances: must be int" in wrong_type.stderr
    unknown = kuberaven("get", "Pods", "--db", database_url)
    assert unknown.returncode == 1 and "unknown kind; did you mean KubernetesServiceInstance?" in unknown.stderr
    plural = kuberaven("get", "KubernetesServiceInstances", "--db", database_url)
    assert plural.stderr == "error: KubernetesServiceInstances: unknown kind; did you mean KubernetesServiceInstance?\n"
    pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers: []\n"
    manifest = kuberaven("apply", "-f", "-", "--db", database_url, stdin=pod)
    assert manifest.returncode == 1 and "a Kubernetes manifest (v1 Pod)" in manifest.stderr, manifest.stderr
    assert "KubernetesResourceInstance" in manifest.stderr

    secrets = kuberaven("get", "KubernetesSecret", "-o", "json", "--db", database_url).stdout
    assert "hunter2" not in secrets and json.loads(secrets)[0]["data"] == {"password": "<hidden>"}

    referenced = kuberaven("delete", "Image", "nginx:1.25", "--db", database_url)
    assert referenced.returncode == 1 and "still referenced" in referenced.stderr
    assert kuberaven("delete", "KubernetesServiceInstance", "shop/web-0", "--db", database_url).returncode == 0
    assert kuberaven("delete", "Image", "nginx:1.25", "--db", database_url).returncode == 0
    assert json.loads(kuberaven("get", "KubernetesServiceInstance", "-o", "json", "--db", database_url).stdout) == []


def test_db_upgrade_is_idempotent_and_reports_an_unreachable_database(database_url: str, tmp_path: Path) -> None:
    for _ in range(2):
        result = kuberaven("db", "upgrade", "--db", database_url)
        assert result.returncode == 0, result.stderr
    db = Database(database_url)
    with db.engine.connect() as connection:
        versions = connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
        # kuberaven's head (the newest script), and the example plugin's branch head (when installed).
        own = script_heads([MIGRATIONS / "versions"])
        assert own is not None and len(own) == 1
        assert set(versions) in (own, {*own, "see0001"}), versions
    db.dispose()
    unreachable = kuberaven("db", "upgrade", "--db", "postgresql://nobody@127.0.0.1:1/none")
    assert unreachable.returncode == 1 and "error:" in unreachable.stderr and "Traceback" not in unreachable.stderr
    missing_dir = kuberaven("db", "upgrade", "--db", f"sqlite:///{tmp_path}/no/such/dir/k.db")
    assert missing_dir.returncode == 1 and "Traceback" not in missing_dir.stderr
