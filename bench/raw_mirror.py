"""The least any mirror of the pods must do, as a baseline for bench/run_bench.py.

GET the bench namespace's pods page by page (limit=500), decode the JSON and
bulk-insert one row per pod into a new SQLite database; print the row count
and the peak RSS as JSON. Standard library (and PyYAML for the kubeconfig)
only, so that its time and memory are the work's, not a framework's.

    python bench/raw_mirror.py KUBECONFIG DATABASE
"""

from __future__ import annotations

import base64
import json
import sqlite3
import ssl
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

NAMESPACE = "bench"  # common.NAMESPACE, not imported: common loads kuberaven


def main(kubeconfig: str, database: str) -> None:
    config = yaml.safe_load(Path(kubeconfig).read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    headers = {"Authorization": f"Bearer {user['token']}", "Accept": "application/json"}
    rows: list[tuple[str, str, str, str | None, str | None, str]] = []
    query = "limit=500"
    while True:
        url = f"{cluster['server']}/api/v1/namespaces/{NAMESPACE}/pods?{query}"
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=context) as response:
            page = json.load(response)
        for p in page["items"]:
            meta, status = p["metadata"], p["status"]
            rows.append(
                (
                    meta["uid"],
                    meta["namespace"],
                    meta["name"],
                    status.get("podIP"),
                    status.get("phase"),
                    json.dumps(meta.get("labels") or {}),
                )
            )
        if not page["metadata"].get("continue"):
            break
        query = urllib.parse.urlencode({"limit": 500, "continue": page["metadata"]["continue"]})
    db = sqlite3.connect(database)
    db.execute("pragma journal_mode=wal")
    db.execute("create table pod (uid text primary key, namespace text, name text, ip text, phase text, labels text)")
    with db:
        db.executemany("insert into pod values (?, ?, ?, ?, ?, ?)", rows)
    db.close()
    print(json.dumps({"rows": len(rows), "peak_mib": peak_rss_mib()}))


def peak_rss_mib() -> float:
    """VmHWM, not getrusage's ru_maxrss: Linux carries that over exec from the parent that spawned us."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
