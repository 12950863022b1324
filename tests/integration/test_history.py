"""History (model/history.py, asof.py, versions.py): a real pod's past through Python, the CLI and REST,
retention, recording on and off, and the upgrade of a database that had rows; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
from typing import Any

import httpx2 as httpx
import pytest
import sqlalchemy as sa

from kuberaven import model
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, DoesNotExist, KubernetesServiceInstance, TrustDomain, ValidationError, utcnow
from kuberaven.model.history import HISTORY, horizon, recording, set_recording
from kuberaven.model.versions import versions
from kuberaven.runtime.history import HistoryKeeper, HistoryOptions
from kuberaven.web.app import create_app
from tests.helpers import PAUSE, eventually, inventory_running, kuberaven, serving

KSI = "KubernetesServiceInstance"
STEP = 0.05  # seconds between a state seen and the next change: the database's clock counts milliseconds


def pod_row(database: Database, namespace: str, name: str) -> dict[str, Any] | None:
    with database.session() as session:
        row = session.scalar(
            sa.select(KubernetesServiceInstance)
            .join(TrustDomain, TrustDomain.id == KubernetesServiceInstance.trust_domain_id)
            .where(TrustDomain.name == namespace, KubernetesServiceInstance.name == name)
        )
        if row is None:
            return None
        return {"phase": row.phase, "pod_ip": row.pod_ip, "labels": row.labels, "node": row.node}


async def seen(database: Database, namespace: str, name: str, **expected: Any) -> dt.datetime:
    """Wait until the pod's row shows ``expected`` (None: no row); the time it held, a little after."""

    def check() -> None:
        row = pod_row(database, namespace, name)
        if expected.get("gone"):
            assert row is None, row
        else:
            assert row is not None and {k: row[k] for k in expected} == expected, row

    await eventually(check)
    await asyncio.sleep(STEP)
    at = utcnow()
    await asyncio.sleep(STEP)
    return at


async def patch_status(kube: KubeClient, namespace: str, name: str, status: dict[str, Any]) -> None:
    await kube.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{name}/status",
        body={"status": status},
        content_type="application/merge-patch+json",
    )


def cli_at(database: Database, at: dt.datetime, *reference: str) -> Any:
    url = database.url.render_as_string(hide_password=False)
    done = kuberaven("get", KSI, *reference, "--at", at.isoformat(), "-o", "json", "--db", url)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_a_pods_past_is_the_same_through_python_the_cli_and_rest(
    database: Database, kube: KubeClient, namespace: str, unserved_node: str
) -> None:
    """Pending → Running → IP → relabelled → deleted: at each time before the next change, every interface
    shows the pod as it was then; `history` lists each version with what changed, and its deletion."""
    key = f"{namespace}/web"
    before = utcnow()
    await asyncio.sleep(STEP)
    async with inventory_running(kube, database):
        body = {
            "metadata": {"name": "web", "labels": {"app": "a"}},
            "spec": {
                "nodeName": unserved_node,
                "containers": [{"name": "c", "image": PAUSE}],
                "terminationGracePeriodSeconds": 0,
            },
        }
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)
        pending = await seen(database, namespace, "web", phase="Pending", labels={"app": "a"})
        await patch_status(kube, namespace, "web", {"phase": "Running"})
        running = await seen(database, namespace, "web", phase="Running", pod_ip=None)
        await patch_status(kube, namespace, "web", {"podIP": "10.9.0.7", "podIPs": [{"ip": "10.9.0.7"}]})
        with_ip = await seen(database, namespace, "web", pod_ip="10.9.0.7")
        await kube.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/web",
            body={"metadata": {"labels": {"app": "b"}}},
            content_type="application/merge-patch+json",
        )
        relabelled = await seen(database, namespace, "web", labels={"app": "b"})
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/web", params={"gracePeriodSeconds": 0})
        deleted = await seen(database, namespace, "web", gone=True)

    expected = {
        pending: ("Pending", None, {"app": "a"}),
        running: ("Running", None, {"app": "a"}),
        with_ip: ("Running", "10.9.0.7", {"app": "a"}),
        relabelled: ("Running", "10.9.0.7", {"app": "b"}),
    }
    model.connect(database.url.render_as_string(hide_password=False))
    with serving(create_app(database)) as url, httpx.Client(base_url=url, timeout=10) as api:
        for at, (phase, ip, labels) in expected.items():
            python = KubernetesServiceInstance.objects.at(at).get(name="web")
            assert (python.phase, python.pod_ip, python.labels) == (phase, ip, labels), at
            assert python.trust_domain is not None and python.trust_domain.name == namespace
            (cli,) = [d for d in cli_at(database, at) if d["name"] == "web"]
            one = api.get(f"/api/v1/{KSI}/{key}", params={"at": at.isoformat()})
            assert one.status_code == 200, one.text
            listed = api.get(f"/api/v1/{KSI}", params={"at": at.isoformat(), "trust_domain": namespace}).json()
            assert listed["items"] == [one.json()] == [cli]
            assert (cli["phase"], cli["pod_ip"], cli["labels"], cli["trust_domain"]) == (
                phase,
                ip,
                labels,
                f"kubernetes/{namespace}",
            )
        for gone in (before, deleted):
            assert not KubernetesServiceInstance.objects.at(gone).filter(name="web").all()
            missing = api.get(f"/api/v1/{KSI}/{key}", params={"at": gone.isoformat()})
            assert missing.status_code == 404 and "did not exist at" in missing.json()["detail"]

        answer = api.get(f"/api/v1/{KSI}/{key}/history")
        assert answer.status_code == 200, answer.text
        found = answer.json()["versions"]
    changed = [sorted(set(v["changes"]) & {"phase", "pod_ip", "labels"}) for v in found]
    assert found[0]["started_by"] == "created" and found[0]["object"]["phase"] == "Pending"
    assert [c for c in changed if c] == [["phase"], ["pod_ip"], ["labels"]]
    assert found[-1]["ended_by"] == "deleted" and found[-1]["object"]["labels"] == {"app": "b"}
    assert all(a["valid_until"] == b["valid_from"] for a, b in itertools.pairwise(found))
    assert next(v for v in found if v["changes"].get("labels"))["changes"]["labels"] == [{"app": "a"}, {"app": "b"}]

    url = database.url.render_as_string(hide_password=False)
    table = kuberaven("history", KSI, key, "--db", url)
    assert table.returncode == 0, table.stderr
    assert "pod_ip:  → 10.9.0.7" in table.stdout and "deleted" in table.stdout
    as_json = kuberaven("history", KSI, key, "-o", "json", "--db", url)
    assert json.loads(as_json.stdout) == found


def test_bad_times_are_refused_naming_the_problem(database: Database) -> None:
    url = database.url.render_as_string(hide_password=False)
    for given, problem in (
        ("yesterday", "'yesterday' is not a time: give ISO 8601"),
        ("-10x", "'-10x' is not a time"),
        ("2999-01-01T00:00:00Z", "is in the future"),
        ("2001-01-01T00:00:00Z", "is before the history kept, which starts at"),
    ):
        done = kuberaven("get", "TrustDomain", "--at", given, "--db", url)
        assert done.returncode == 1 and problem in done.stderr, done.stderr
        with serving(create_app(database)) as base, httpx.Client(base_url=base, timeout=10) as api:
            answer = api.get("/api/v1/TrustDomain", params={"at": given})
        assert answer.status_code == 422 and problem in answer.json()["detail"], answer.text
    missing = kuberaven("history", "TrustDomain", "kubernetes/never", "--db", url)
    assert missing.returncode == 1 and "has no versions" in missing.stderr


def _rename(database: Database, old: str, new: str) -> None:
    with database.session() as session:
        session.execute(sa.update(TrustDomain).where(TrustDomain.name == old).values(name=new))


def _history_rows(database: Database, table: str = "trust_domain") -> int:
    with database.engine.connect() as db:
        return db.execute(sa.select(sa.func.count()).select_from(HISTORY[table])).scalar() or 0


def test_retention_prunes_in_batches_and_refuses_the_pruned_past(database: Database) -> None:
    with database.session() as session:
        session.add(TrustDomain(name="shop", owner_id=1, xos_managed=False))
    for i in range(5):
        _rename(database, "shop" if i == 0 else f"shop{i}", f"shop{i + 1}")
    with database.session() as session:
        session.execute(sa.delete(TrustDomain).where(TrustDomain.name == "shop5"))
    assert _history_rows(database) == 6  # five renames and the delete
    keeper = HistoryKeeper(database, HistoryOptions(retention=3600, prune_batch=2))
    assert keeper.prune_once() == 0  # nothing is an hour old
    later = utcnow() + dt.timedelta(hours=2)
    assert keeper.prune_once(now=later) == 6
    assert _history_rows(database) == 0
    with database.engine.connect() as db:
        since = horizon(db)
        assert since is not None and since > utcnow()  # the cutoff: an hour after now
        with pytest.raises(DoesNotExist, match="has no versions"):
            versions(db, TrustDomain, "kubernetes/shop5")


def test_recording_off_records_nothing_and_on_again_starts_a_new_horizon(database: Database) -> None:
    with database.session() as session:
        session.add(TrustDomain(name="blog", owner_id=1, xos_managed=False))
    with database.engine.begin() as db:
        assert recording(db)
        assert set_recording(db, False) and not recording(db)
    _rename(database, "blog", "blog2")
    assert _history_rows(database) == 0
    with database.engine.begin() as db:
        assert set_recording(db, True) and recording(db)
        since = horizon(db)
    assert since is not None and utcnow() - since < dt.timedelta(seconds=30)
    _rename(database, "blog2", "blog3")
    assert _history_rows(database) == 1


def test_a_namespace_deleted_takes_its_pods_into_history(database: Database) -> None:
    """Rows deleted by the database's ON DELETE CASCADE are recorded as deleted too."""
    with database.session() as session:
        td = TrustDomain(name="gone", owner_id=1, xos_managed=False)
        session.add(td)
        session.flush()
        session.add(KubernetesServiceInstance(name="p", trust_domain_id=td.id, owner_id=1, xos_managed=False))
    at = utcnow()
    with database.session() as session:
        session.execute(sa.delete(TrustDomain).where(TrustDomain.name == "gone"))
    with database.engine.connect() as db:
        (version,) = versions(db, KubernetesServiceInstance, "gone/p")
    assert version.ended_by == "deleted" and version.document["trust_domain"] == "kubernetes/gone"
    model.connect(database.url.render_as_string(hide_password=False))
    (past,) = KubernetesServiceInstance.objects.at(at).filter(name="p")
    with pytest.raises(ValidationError, match="read-only"):
        past.save()


def test_an_upgrade_keeps_the_rows_and_starts_recording(database_url: str) -> None:
    """A database at the previous head with rows, upgraded: the rows stay, and their changes are recorded."""
    database = Database(database_url)
    try:
        database.upgrade("0006")
        with database.engine.begin() as db:
            db.execute(
                sa.text(
                    "INSERT INTO site (name, created, updated, backend_status, backend_code, policy_code,"
                    " xos_managed, deleted, backend_need_delete, no_sync, no_policy, adopt, enabled)"
                    " VALUES ('old-site', '2020-01-01 00:00:00', '2020-01-01 00:00:00', 'OK', 1, 0,"
                    " false, false, false, false, false, false, true)"
                )
            )
        database.prepare()
        with database.engine.begin() as db:
            assert db.execute(sa.text("SELECT name FROM site WHERE name = 'old-site'")).scalar() == "old-site"
            assert recording(db)
            db.execute(sa.text("UPDATE site SET login_base = 'x' WHERE name = 'old-site'"))
        with database.engine.connect() as db:
            from kuberaven.model import Site

            found = versions(db, Site, "old-site")
        assert [v.started_by for v in found] == ["created", "updated"]
        assert found[1].changes == {"login_base": [None, "x"]}
    finally:
        database.dispose()


def test_a_secrets_values_are_never_kept_in_its_history(database: Database) -> None:
    from kuberaven.model import KubernetesSecret

    with database.session() as session:
        session.add(
            KubernetesSecret(name="creds", trust_domain_id=1, data={"password": "old-value"}, keys=["password"])
        )
    with database.session() as session:
        session.execute(
            sa.update(KubernetesSecret).where(KubernetesSecret.name == "creds").values(data={"password": "new-value"})
        )
    with database.engine.connect() as db:
        stored = db.execute(sa.select(HISTORY["kubernetes_secret"])).mappings().all()
        assert [(row["data"], row["keys"]) for row in stored] == [(None, ["password"])]
        assert "old-value" not in json.dumps(versions(db, KubernetesSecret, "default/creds")[0].as_document())


async def test_the_keeper_under_the_daemon_sets_recording_as_the_setting_says_and_prunes(database: Database) -> None:
    from tests.helpers import component_running

    _rename(database, "default", "default2")
    _rename(database, "default2", "default")
    keeper = HistoryKeeper(database, HistoryOptions(enabled=False, retention=0.001, prune_interval=0.05))
    async with component_running(keeper):

        def upkept() -> None:
            with database.engine.connect() as db:
                assert not recording(db)
            assert _history_rows(database) == 0 and keeper.pruned == 2

        await eventually(upkept, timeout=10)
    assert keeper.status()[0].last_error is None
