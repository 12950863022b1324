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
from tests.helpers import kuberaven, serving

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
    assert stored is not None
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
    refused = subprocess.run(
        [sys.executable, "-m", "kuberaven", "apply", "-f", "f.yaml", "--db", database_url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert refused.returncode == 1 and says in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert site_names(database_url) == before, "nothing of a refused file is stored"


TOO_BIG = 2**63
UNCAUGHT_BEFORE = [  # each answered 500 with a traceback in the log
    ("GET", "/api/v1/Slice?limit=²", None, 422, "limit: must be a non-negative integer"),
    ("GET", f"/api/v1/Slice?limit={TOO_BIG}", None, 422, "limit: must be"),
    ("GET", "/api/v1/Slice?limit=-1", None, 422, "limit: must be a non-negative integer"),
    ("GET", f"/api/v1/Slice?offset={TOO_BIG}", None, 422, "offset: must be a non-negative integer"),
    ("GET", "/api/v1/events?since=²", None, 422, "since: must be an event sequence number"),
    ("GET", f"/api/v1/Slice?max_instances={TOO_BIG}", None, 422, "max_instances: must be an integer from"),
    ("GET", "/api/v1/Slice/²", None, 404, "does not exist"),
    ("GET", f"/api/v1/Slice/{TOO_BIG}", None, 404, "does not exist"),
    ("DELETE", f"/api/v1/Site/{TOO_BIG}", None, 404, "does not exist"),
    ("POST", "/api/v1/Slice", {"name": "big", "site": "mysite", "max_instances": TOO_BIG}, 422, "max_instances: must"),
    ("POST", "/api/v1/Slice", {"name": "big", "site": TOO_BIG}, 422, "does not exist"),
    (
        "POST",
        "/api/v1/apply",
        f"- kind: Slice\n  name: big\n  site: mysite\n  max_instances: {TOO_BIG}\n",
        422,
        "line 1: Slice.max_instances: must be between",
    ),
]


def stored(database: Database) -> dict[str, int]:
    """How many rows every table holds."""
    with database.engine.connect() as connection:
        tables = sa.inspect(connection).get_table_names()
        return {t: connection.execute(sa.select(sa.func.count()).select_from(sa.table(t))).scalar_one() for t in tables}


@pytest.mark.parametrize(("method", "path", "body", "status", "says"), UNCAUGHT_BEFORE, ids=lambda v: str(v)[:40])
def test_odd_numbers_in_rest_requests_are_refused_with_a_4xx(
    api: httpx.Client, database: Database, method: str, path: str, body: object, status: int, says: str
) -> None:
    before = stored(database)
    if isinstance(body, str):
        answer = api.request(method, path, content=body, headers={"Content-Type": "application/yaml"})
    else:
        answer = api.request(method, path, json=body)
    assert answer.status_code == status, answer.text
    assert says in answer.json()["detail"], answer.json()
    assert stored(database) == before


def test_odd_input_on_the_command_line_is_one_line_and_exit_1(database_url: str, tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("- kind: Site\n  name: café\n".encode("latin-1"))
    big = f"- kind: Slice\n  name: big\n  site: mysite\n  max_instances: {TOO_BIG}\n"
    cases = [
        (("apply", "-f", str(latin1), "--db", database_url), None, "latin1.yaml: not UTF-8 text (byte 0xe9 at offset"),
        (("apply", "-f", "-", "--db", database_url), big, "<stdin>:1: Slice.max_instances: must be between"),
        (("delete", "Slice", "²", "--db", database_url), None, "Slice '²' does not exist"),
        (("delete", "Slice", str(TOO_BIG), "--db", database_url), None, "does not exist"),
        (("get", "Site", "--db", "mysql://kuberaven:pw@localhost/k"), None, "'mysql' is not supported"),
        (("db", "upgrade", "--db", "not a url"), None, "is not a URL"),
    ]
    before = site_names(database_url)
    for args, stdin, says in cases:
        refused = kuberaven(*args, stdin=stdin)
        assert refused.returncode == 1 and says in refused.stderr, (args, refused.stderr)
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr, refused.stderr
        assert "pw@" not in refused.stderr, "the password is not printed"
    assert site_names(database_url) == before


def test_run_with_an_unsupported_database_url_says_so_and_exits_1(tmp_path: Path) -> None:
    ran = kuberaven("run", "--db", "mysql://kuberaven@localhost/k", "--kubeconfig", str(tmp_path / "none"))
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert "error: database URL mysql://kuberaven@localhost/k: 'mysql' is not supported" in ran.stderr
