"""`kuberaven apply -f` on a large file, beside a bare SQLAlchemy bulk insert of the same rows.

Writes a file of N TrustDomain documents and N Slice documents (each Slice
refers to a TrustDomain by name, as real files do), applies it with the CLI's
code path (parse_documents + apply_documents, one transaction) on a new
SQLite database, and, in the same run, inserts the same rows with one
executemany per table (the least any loader must do). Prints documents per
second and the peak RSS of each side, each measured in a child process of
its own.

    python bench/apply_bench.py [--documents 10000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import print_table


def write_file(path: Path, documents: int) -> None:
    half = documents // 2
    with path.open("w") as out:
        for i in range(half):
            out.write(f"- kind: TrustDomain\n  name: team-{i}\n  owner: kubernetes\n")
        for i in range(half):
            out.write(f"- kind: Slice\n  name: web-{i}\n  trust_domain: kubernetes/team-{i}\n  site: mysite\n")


def kuberaven_side(file: Path, url: str) -> None:
    from kuberaven.model import connect
    from kuberaven.model.applying import apply_documents
    from kuberaven.model.parsing import parse_documents

    database = connect(url)  # a new database: the cluster "kubernetes" and the site "mysite" are made
    started = time.perf_counter()
    located = parse_documents(file.read_text(), str(file))
    with database.session() as session:
        apply_documents(session, located, str(file))
        session.commit()
    _report(time.perf_counter() - started, len(located))


def bulk_side(file: Path, url: str) -> None:
    import sqlalchemy as sa

    from kuberaven.model import TrustDomain, connect
    from kuberaven.model.base import table_of
    from kuberaven.model.cluster import Slice

    database = connect(url)
    documents = file.read_text().count("- kind:")
    half = documents // 2
    started = time.perf_counter()
    with database.engine.begin() as db:
        owner = db.execute(sa.text("select id from service where name = 'kubernetes'")).scalar_one()
        site = db.execute(sa.text("select id from site where name = 'mysite'")).scalar_one()
        domains = table_of(TrustDomain)
        db.execute(sa.insert(domains), [{"name": f"team-{i}", "owner_id": owner} for i in range(half)])
        ids = dict(db.execute(sa.select(domains.c.name, domains.c.id)).all())
        db.execute(
            sa.insert(table_of(Slice)),
            [{"name": f"web-{i}", "trust_domain_id": ids[f"team-{i}"], "site_id": site} for i in range(half)],
        )
    _report(time.perf_counter() - started, documents)


def _report(seconds: float, documents: int) -> None:
    peak = next(
        int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM:")
    )
    print(json.dumps({"seconds": seconds, "documents": documents, "peak_mib": peak / 1024}))


def child(side: str, file: Path, directory: Path) -> dict[str, float]:
    url = f"sqlite:///{directory / side}.db"
    output = subprocess.run(
        [sys.executable, __file__, "--side", side, str(file), url], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=10000)
    parser.add_argument("--side", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side, file, url = args.side
        (kuberaven_side if side == "kuberaven" else bulk_side)(Path(file), url)
        return
    with tempfile.TemporaryDirectory(prefix="kuberaven-bench-") as name:
        directory = Path(name)
        file = directory / "objects.yaml"
        write_file(file, args.documents)
        size = file.stat().st_size
        ours, bulk = child("kuberaven", file, directory), child("bulk", file, directory)
    n = args.documents
    rate, bulk_rate = n / ours["seconds"], n / bulk["seconds"]
    print_table(
        [
            (
                f"apply -f, {n} documents ({size / 1e6:.1f} MB)",
                f"{rate:.0f} docs/s",
                f"{bulk_rate:.0f} rows/s bulk",
                f"{bulk_rate / rate:.1f}x slower",
            ),
            ("peak RSS", f"{ours['peak_mib']:.0f} MiB", f"{bulk['peak_mib']:.0f} MiB bulk", ""),
        ]
    )
    print(json.dumps({"documents": n}))


if __name__ == "__main__":
    main()
