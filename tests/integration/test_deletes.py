"""One delete rule (model/deletes.py) through Python, the CLI and REST, on SQLite and PostgreSQL.

The same deletes are made through each on its own copy of the same rows; the
answers (refused, missing, what would go, what went) and what is stored after
each step, tombstones for the sync loop included, must be the same.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx2 as httpx
import pytest
import sqlalchemy as sa

from kuberaven.model import Database, Image, KubernetesServiceInstance, Slice, SyncTombstone, TrustDomain
from kuberaven.model.applying import apply_documents
from kuberaven.model.database import remove
from kuberaven.model.documents import model_for, qualified_name, resolve
from kuberaven.model.errors import DeleteRefused, DoesNotExist
from kuberaven.model.parsing import parse_documents
from kuberaven.web.app import create_app
from tests.helpers import serving

ROWS = """\
- kind: TrustDomain
  name: {p}
  owner: kubernetes
- kind: Image
  name: img-{p}:1
- kind: Slice
  name: web
  site: mysite
  trust_domain: kubernetes/{p}
- kind: KubernetesServiceInstance
  name: web-0
  slice: kubernetes/{p}/web
  image: img-{p}:1
"""
# (kind, reference, cascade, dry run); {p} is each interface's own copy.
STEPS = [
    ("Image", "img-{p}:1", False, False),  # an instance runs it: refused, cascade or not
    ("Image", "img-{p}:1", True, False),
    ("TrustDomain", "kubernetes/{p}", False, False),  # would take its slice and pod: refused
    ("TrustDomain", "kubernetes/{p}", False, True),  # a dry run answers as the delete would
    ("TrustDomain", "kubernetes/{p}", True, True),  # lists what would go, stores nothing
    ("TrustDomain", "kubernetes/no-{p}", True, False),  # missing
    ("Slice", "²", True, False),  # a name, not an id
    ("TrustDomain", "kubernetes/{p}", True, False),  # goes, with its slice and pod
    ("Image", "img-{p}:1", False, False),  # nothing refers to it any more
]
Outcome = tuple[str, Any]  # ("refused" | "missing" | "deleted" | "would delete", message or rows)


def python_delete(database: Database, kind: str, reference: str, cascade: bool, dry_run: bool) -> Outcome:
    with database.sessions() as session:
        try:
            row = resolve(session, model_for(kind), int(reference) if reference.isdecimal() else reference)
            plan = remove(session, row, cascade=cascade, dry_run=dry_run)
        except DeleteRefused as error:
            return "refused", str(error)
        except DoesNotExist as error:
            return "missing", str(error)
    return ("would delete" if dry_run else "deleted"), [str(r) for r in plan.rows]


def cli_delete(database: Database, kind: str, reference: str, cascade: bool, dry_run: bool) -> Outcome:
    url = database.url.render_as_string(hide_password=False)
    flags = [*(["--cascade"] if cascade else []), *(["--dry-run"] if dry_run else [])]
    result = subprocess.run(
        [sys.executable, "-m", "kuberaven", "delete", kind, reference, *flags, "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0:
        assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
        message = result.stderr.strip().removeprefix("error: ")
        return ("missing" if "does not exist" in message else "refused"), message
    suffix = " would be deleted" if dry_run else " deleted"
    lines = result.stdout.splitlines()
    assert all(line.endswith(suffix) for line in lines), lines
    return ("would delete" if dry_run else "deleted"), [line.removesuffix(suffix) for line in lines]


def rest_delete(api: httpx.Client) -> Callable[..., Outcome]:
    def delete(_database: Database, kind: str, reference: str, cascade: bool, dry_run: bool) -> Outcome:
        params = {"cascade": str(cascade).lower(), "dry_run": str(dry_run).lower()}
        answer = api.delete(f"/api/v1/{kind}/{reference}", params=params)
        if answer.status_code in (404, 409):
            return ("missing" if answer.status_code == 404 else "refused"), answer.json()["detail"]
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["dry_run"] is dry_run and body["deleted"][0]["name"] == body["name"]
        rows = [
            f"{r['kind']} {r['name']!r}" + (" (deleted in Kubernetes)" if r["in_kubernetes"] else "")
            for r in body["deleted"]
        ]
        return ("would delete" if dry_run else "deleted"), rows

    return delete


def stored(database: Database, p: str) -> dict[str, list[str]]:
    """The rows of one copy, and the tombstones the sync loop would read for it."""
    with database.session() as session:
        names = {
            model.__name__: [qualified_name(r) for r in session.scalars(sa.select(model))]
            for model in (TrustDomain, Image, Slice, KubernetesServiceInstance)
        }
        found = {kind: sorted(n for n in found if p in n) for kind, found in names.items()}
        tombstones = session.scalars(sa.select(SyncTombstone).order_by(SyncTombstone.id))
        found["tombstones"] = [f"{t.model} {t.namespace}/{t.name}" for t in tombstones if p in (t.namespace, t.name)]
    return found


def test_python_cli_and_rest_delete_alike(database: Database) -> None:
    copies = {"py": "tdpy", "cli": "tdcli", "rest": "tdrest"}
    with database.session() as session:
        for p in copies.values():
            apply_documents(session, parse_documents(ROWS.format(p=p)))
    with serving(create_app(database)) as url, httpx.Client(base_url=url, timeout=30) as api:
        interfaces = {"py": python_delete, "cli": cli_delete, "rest": rest_delete(api)}
        runs: dict[str, list[tuple[Outcome, dict[str, list[str]]]]] = {}
        for name, delete in interfaces.items():
            p = copies[name]
            runs[name] = []
            for kind, reference, cascade, dry_run in STEPS:
                outcome = delete(database, kind, reference.format(p=p), cascade, dry_run)
                # One copy's answers and state, written as the py copy's: they must be the same.
                runs[name].append(_as_py((outcome, stored(database, p)), p))
    assert runs["cli"] == runs["py"]
    assert runs["rest"] == runs["py"]

    steps = runs["py"]
    (refused, _), (also_refused, _) = steps[0], steps[1]
    assert refused[0] == also_refused[0] == "refused" and "still referenced by KubernetesServiceInstance" in refused[1]
    outcome, state = steps[2]
    assert outcome[0] == "refused" and "would delete 2 other rows" in outcome[1]
    assert "KubernetesServiceInstance 'kubernetes/tdpy/web-0' (deleted in Kubernetes)" in outcome[1]
    assert "nothing was deleted" in outcome[1] and state["KubernetesServiceInstance"] and not state["tombstones"]
    assert steps[3][0] == outcome  # the dry run refuses as the delete would
    (kind_of, rows), state = steps[4]
    assert kind_of == "would delete" and rows == [
        "TrustDomain 'kubernetes/tdpy' (deleted in Kubernetes)",
        "Slice 'kubernetes/tdpy/web' (deleted in Kubernetes)",
        "KubernetesServiceInstance 'kubernetes/tdpy/web-0' (deleted in Kubernetes)",
    ]
    assert state == steps[0][1] and not state["tombstones"], "a dry run stores nothing"
    assert steps[5][0] == ("missing", "TrustDomain 'kubernetes/no-tdpy' does not exist")
    assert steps[6][0][0] == "missing" and "'²' does not exist" in steps[6][0][1]
    (kind_of, rows), state = steps[7]
    assert kind_of == "deleted" and len(rows) == 3
    assert state == {
        "TrustDomain": [],
        "Image": ["img-tdpy:1"],
        "Slice": [],
        "KubernetesServiceInstance": [],
        # What provisioning deletes in Kubernetes (provisioning/loop.py reads these tombstones).
        "tombstones": ["TrustDomain None/tdpy", "Slice tdpy/web", "KubernetesServiceInstance tdpy/web-0"],
    }
    assert steps[8][0] == ("deleted", ["Image 'img-tdpy:1'"])


def _as_py(value: Any, p: str) -> Any:
    if isinstance(value, str):
        return value.replace(p, "tdpy")
    if isinstance(value, list | tuple):
        return type(value)(_as_py(v, p) for v in value)
    if isinstance(value, dict):
        return {k: _as_py(v, p) for k, v in value.items()}
    return value


@pytest.mark.parametrize("flag", ["maybe", "2"])
def test_rest_refuses_a_flag_that_is_not_a_boolean(database: Database, flag: str) -> None:
    with serving(create_app(database)) as url, httpx.Client(base_url=url, timeout=10) as api:
        answer = api.delete("/api/v1/TrustDomain/kubernetes/default", params={"cascade": flag})
        assert answer.status_code == 422 and "cascade" in answer.json()["detail"]
    with database.session() as session:
        assert session.scalar(sa.select(TrustDomain).where(TrustDomain.name == "default")) is not None
