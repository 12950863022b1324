"""`kuberaven run` loads only what its features need before /readyz, and the rest on first use (issue 26).

A real daemon on the local control plane, the embedded network backend, a fresh SQLite database and no Kafka:
by the time /readyz answers 200 (every component synced) it has imported neither OpenStack's SDK nor the web
stack (FastAPI, Starlette, pydantic, jinja2) nor Alembic (a fresh schema is made in one step, model/schema.py);
the first request that is not a probe imports FastAPI and answers. The check runs inside the daemon's own
process (a thread beside it), since only that process knows what it imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kuberaven.testing.env import TestEnv
from kuberaven.testing.free_ports import free_port

NOT_BEFORE_READY = ["openstack", "keystoneauth1", "fastapi", "starlette", "pydantic", "jinja2", "alembic"]
ON_FIRST_PAGE = ["fastapi", "starlette", "pydantic"]
# Correctness bound, not performance: a start on a busy test machine takes seconds, not minutes.
READY_WITHIN = 120.0

# Runs `kuberaven run` in this process; a thread waits for /readyz 200, notes which of the watched modules
# are loaded, asks for one API page, notes them again, writes both and stops the daemon with SIGTERM.
DAEMON_WITH_A_WITNESS = """
import json, os, signal, sys, threading, time, urllib.error, urllib.request

listen, watched, out, deadline = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], float(sys.argv[4])


def status(path):
    try:
        with urllib.request.urlopen(f"http://{listen}{path}", timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def witness():
    give_up = time.monotonic() + deadline
    while status("/readyz") != 200 and time.monotonic() < give_up:
        time.sleep(0.05)
    ready = status("/readyz")
    at_ready = [m for m in watched if m in sys.modules]
    page = status("/api/v1/kinds")
    after = [m for m in watched if m in sys.modules]
    with open(out, "w") as sink:
        json.dump({"ready": ready, "at_ready": at_ready, "page": page, "after_page": after}, sink)
    os.kill(os.getpid(), signal.SIGTERM)


threading.Thread(target=witness, daemon=True).start()
sys.argv = ["kuberaven", "run", *sys.argv[5:]]
from kuberaven.cli import main

main()
"""


def test_run_loads_no_openstack_web_stack_or_alembic_before_ready_and_fastapi_on_the_first_page(
    testenv: TestEnv, tmp_path: Path
) -> None:
    listen = f"127.0.0.1:{free_port()}"
    out = tmp_path / "witness.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERAVEN_")}
    env["KUBERAVEN_DB"] = f"sqlite:///{tmp_path / 'fresh.db'}"
    args = ["--kubeconfig", str(testenv.control_plane.kubeconfig), "--listen", listen, "--network-backend", "embedded"]
    watched = sorted({*NOT_BEFORE_READY, *ON_FIRST_PAGE})
    done = subprocess.run(
        [sys.executable, "-c", DAEMON_WITH_A_WITNESS, listen, json.dumps(watched), str(out), str(READY_WITHIN), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=READY_WITHIN + 60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(out.read_text())
    assert seen["ready"] == 200, done.stderr[-3000:]
    assert seen["at_ready"] == []
    assert seen["page"] == 200
    assert sorted(set(ON_FIRST_PAGE) & set(seen["after_page"])) == sorted(ON_FIRST_PAGE)
    assert not {"openstack", "keystoneauth1", "alembic"} & set(seen["after_page"])
