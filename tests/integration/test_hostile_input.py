"""Hostile and malformed input through the CLI and REST (issue: hardening): refused clearly, nothing stored changed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest
import sqlalchemy as sa

from kuberaven.model import Database, KubernetesResourceInstance
from kuberaven.web.app import create_app
from tests.helpers import serving

SECRET_RESOURCES = """\
- kind: KubernetesResourceInstance
  name: with-secret
  resource_definition: |
    apiVersion: v1
    kind: Secret
    metadata: {name: db}
    stringData: {password: hunter2}
    ---
    apiVersion: v1
    kind: Secret
    metadata: {name: tls}
    data: {key: aHVudGVyMw==}
"""


def kuberaven(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kuberaven", *args], input=stdin, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


@pytest.fixture
def api(database: Database) -> Iterator[httpx.Client]:
    with serving(create_app(database)) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def test_secret_values_in_raw_yaml_are_hidden_in_every_output_but_stored(
    api: httpx.Client, database: Database, database_url: str
) -> None:
    applied = api.post("/api/v1/apply", content=SECRET_RESOURCES, headers={"Content-Type": "application/yaml"})
    assert applied.status_code == 200, applied.text
    shown = [
        applied.text,
        api.get("/api/v1/KubernetesResourceInstance/with-secret").text,
        api.get("/api/v1/KubernetesResourceInstance").text,
        api.patch("/api/v1/KubernetesResourceInstance/with-secret", json={"kubectl_state": "updated"}).text,
        kuberaven("get", "KubernetesResourceInstance", "with-secret", "-o", "json", "--db", database_url).stdout,
        kuberaven("get", "KubernetesResourceInstance", "-o", "json", "--db", database_url).stdout,
    ]
    for text in shown:
        assert "<hidden>" in text and "hunter2" not in text and "aHVudGVyMw==" not in text, text
    with database.session() as session:
        stored = session.scalars(sa.select(KubernetesResourceInstance.resource_definition)).one()
    assert "stringData: {password: hunter2}" in stored and "data: {key: aHVudGVyMw==}" in stored, "stored unchanged"
    assert json.loads(shown[4])[0]["resource_definition"].count("<hidden>") == 2


SLICE_TWICE = """\
- kind: Site
  name: twice-site
- kind: Site
  name: twice-site
  login_base: other
"""
KEY_TWICE = "- kind: Site\n  name: keyed-site\n  name: other-site\n"
BAD_IMAGE = "- kind: Site\n  name: image-site\n- kind: Image\n  name: nginx:1.25:bad\n"


def site_names(database_url: str) -> list[str]:
    return [d["name"] for d in json.loads(kuberaven("get", "Site", "-o", "json", "--db", database_url).stdout)]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (SLICE_TWICE, "f.yaml:3: Site 'twice-site' is also given at line 1: give each object once"),
        (KEY_TWICE, "f.yaml:3: key 'name' given twice (first at line 2)"),
        (BAD_IMAGE, "f.yaml:3: more than one tag (':') in image reference 'nginx:1.25:bad'"),
    ],
    ids=["object-twice", "key-twice", "image-two-tags"],
)
def test_apply_refuses_silent_merges_naming_file_and_line(
    database_url: str, tmp_path: Path, text: str, says: str
) -> None:
    before = site_names(database_url)
    (tmp_path / "f.yaml").write_text(text)
    refused = subprocess.run([sys.executable, "-m", "kuberaven", "apply", "-f", "f.yaml", "--db", database_url],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 1 and says in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert site_names(database_url) == before, "nothing of a refused file is stored"
