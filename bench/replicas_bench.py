"""Clusters shared across replicas: 4 clusters × N pods on 1 replica, then on 2 (time to every event in Kafka).

Starts ``--control-planes`` local control planes (4: one per cluster; 1: the
four KubernetesService rows name the same API server, each seeing the same N
pods: lighter, for small machines), one broker and one PostgreSQL, and
creates N Running pods per control plane on a Node no kubelet serves (nothing
else changes them). Then, for 1 and for 2 replicas, on a fresh database
holding the four rows: ``kuberaven run --leader-elect --kafka …`` × R (no
network translation), timed from their start until all 4 × N "created"
events are acknowledged by Kafka (sent in the outbox). The 1-replica run is
the baseline.

Each run also prints where the time and the cores went:

- per cluster, when its first and its last pod row were written (an outbox
  row is written in the pod row's transaction) and when its last event was
  acknowledged by Kafka; "inventory done" is the last row of all;
- which replica owned which clusters at the end (their logs), each replica's
  pod rows per second (its clusters' rows over its first-to-last row), and
  whether it published;
- CPU seconds used during the run by each process group: each replica (its
  librdkafka threads apart), the API server(s) + etcd, the controllers,
  PostgreSQL, the broker, this process (the fake kubelet, the polling), and
  the rest of the machine (other users of the cores), beside the wall time
  × cores, with the load average at the start; and the WAL PostgreSQL wrote;
- last, the relay alone in this process, re-sending the 1-replica run's
  events (made unsent) to a new topic: events/s, CPU and WAL per event.

    python bench/replicas_bench.py [--pods 5000] [--control-planes 4] [--keep-logs DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # psutil ships no type hints (no types-psutil in the dev deps)
import sqlalchemy as sa

from common import create_namespace_and_node, create_pods, print_table, start_pods
from kuberaven.events.options import RelayOptions
from kuberaven.events.relay import OutboxRelay
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, KubernetesService
from kuberaven.testing.env import TestEnv
from kuberaven.testing.free_ports import free_port
from kuberaven.testing.postgres import PostgresServer

CLUSTERS = ["kubernetes", "edge-1", "edge-2", "edge-3"]  # the default row and three more
WRITERS = 16
POLL = 0.25  # seconds between reads of the outbox's progress
LIBRDKAFKA_THREAD = "rdk:"  # librdkafka names its threads rdk:main, rdk:broker…
OWNING = "owning clusters "
RELEASING = "releasing cluster "
PUBLISHING = ("this replica publishes", "publishing the events of cluster")
BENCH = "bench (kubelet, polling)"


async def fill(env: TestEnv, pods: int) -> None:
    client = KubeClient.from_kubeconfig(env.control_plane.kubeconfig)
    try:
        await create_namespace_and_node(client)
        await create_pods(client, pods, WRITERS)
        await start_pods(client, pods, WRITERS)
    finally:
        await client.close()


def fresh_database(server: PostgresServer, envs: list[TestEnv]) -> Database:
    """A new database whose four cluster rows name the control planes in turn."""
    database = Database(server.create_database(f"bench_{uuid.uuid4().hex[:8]}"))
    kubeconfigs = [str(env.control_plane.kubeconfig) for env in envs]
    database.prepare(kubeconfigs[0])
    with database.session() as session:
        for i, name in enumerate(CLUSTERS[1:], start=1):
            session.add(KubernetesService(name=name, kubeconfig=kubeconfigs[i % len(kubeconfigs)]))
        session.commit()
    return database


# -- progress: when each cluster's rows were written and sent ------------------------------------------


@dataclass
class ClusterProgress:
    first_row: float | None = None  # seconds since the run's start
    rows_done: float | None = None
    sent_done: float | None = None


def progress(database: Database) -> dict[str, tuple[int, int]]:
    """Per cluster: created events written, and of them acknowledged by Kafka."""
    query = "select cluster, count(*), count(sent) from event_outbox where status = 'created' group by cluster"
    with database.engine.connect() as db:
        return {cluster: (int(rows), int(sent)) for cluster, rows, sent in db.execute(sa.text(query))}


def observe(seen: dict[str, ClusterProgress], counts: dict[str, tuple[int, int]], pods: int, now: float) -> None:
    for cluster in CLUSTERS:
        rows, sent = counts.get(cluster, (0, 0))
        mark = seen.setdefault(cluster, ClusterProgress())
        if rows and mark.first_row is None:
            mark.first_row = now
        if rows >= pods and mark.rows_done is None:
            mark.rows_done = now
        if sent >= pods and mark.sent_done is None:
            mark.sent_done = now


def wal_position(database: Database) -> int:
    """Bytes of WAL the server has written so far."""
    with database.engine.connect() as db:
        return int(db.execute(sa.text("select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')")).scalar_one())


# -- CPU seconds per process group ------------------------------------------------------------------


def tree_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its descendants (live ones, and those it reaped)."""
    try:
        root = psutil.Process(pid)
        times = root.cpu_times()
        total = times.user + times.system + times.children_user + times.children_system
        for child in root.children(recursive=True):
            try:
                child_times = child.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += child_times.user + child_times.system
        return total
    except psutil.NoSuchProcess:
        return 0.0


def librdkafka_seconds(pid: int) -> float:
    """CPU seconds of a process's librdkafka threads (named rdk:…)."""
    total = 0.0
    for thread in psutil.Process(pid).threads():
        try:
            name = Path(f"/proc/{pid}/task/{thread.id}/comm").read_text().strip()
        except OSError:
            continue
        if name.startswith(LIBRDKAFKA_THREAD):
            total += thread.user_time + thread.system_time
    return total


def machine_seconds() -> float:
    """CPU seconds the whole machine has been busy (not idle nor iowait), from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def server_groups(envs: list[TestEnv], server: PostgresServer) -> dict[str, list[int]]:
    """The long-running servers of the bench, by group, as process ids."""
    planes = [env.control_plane for env in envs]
    broker = envs[0].broker
    assert broker is not None and broker.process is not None and server.process is not None
    return {
        "API server(s) + etcd": [p.pid for cp in planes for p in (cp.apiserver, cp.etcd) if p is not None],
        "controllers": [p.pid for cp in planes for p in (cp.controller_manager, cp.scheduler) if p is not None],
        "PostgreSQL": [server.process.pid],
        "broker": [broker.process.pid],
    }


def snapshot(groups: dict[str, list[int]]) -> dict[str, float]:
    own = psutil.Process().cpu_times()  # not its children: the servers and replicas are counted apart
    seconds = {name: sum(tree_seconds(pid) for pid in pids) for name, pids in groups.items()}
    return seconds | {BENCH: own.user + own.system}


# -- the replicas -----------------------------------------------------------------------------------


@dataclass
class Replica:
    process: subprocess.Popen[bytes]
    log: Path
    cpu: float = 0.0
    librdkafka: float = 0.0
    owned: list[str] = field(default_factory=list)
    taken: dict[str, float] = field(default_factory=dict)  # cluster -> seconds into the run it was taken
    publishes: bool = False


def start(database: Database, envs: list[TestEnv], topic: str, log: Path) -> Replica:
    broker = envs[0].broker
    assert broker is not None
    env = {
        **os.environ,
        "KUBERAVEN_DB": database.url.render_as_string(hide_password=False),
        "KUBERAVEN_KUBECONFIG": str(envs[0].control_plane.kubeconfig),
        "KUBERAVEN_KAFKA": broker.bootstrap,
        "KUBERAVEN_TOPIC": topic,
        "KUBERAVEN_LEADER_ELECT": "true",
        "KUBERAVEN_LISTEN": f"127.0.0.1:{free_port()}",
        "KUBERAVEN_LEASE_NAME": topic,
    }  # one per run: its replicas share it
    with log.open("ab") as sink:
        command = [sys.executable, "-m", "kuberaven", "run", "--no-network", "--log-format", "json"]
        return Replica(subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT), log)


def read_log(replica: Replica, started_at: float, until: float) -> list[str]:
    """Up to ``until`` (seconds into the run): the clusters the replica owned and whether it published;
    its ownership changes as 't+s: message'."""
    changes, owned = [], set[str]()
    for line in replica.log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = str(entry.get("message", ""))
        publishes = any(p in message for p in PUBLISHING)
        if not message.startswith((OWNING, RELEASING)) and not publishes:
            continue
        when = datetime.strptime(entry["asctime"], "%Y-%m-%d %H:%M:%S,%f").timestamp() - started_at
        if when > until:
            break
        if message.startswith(OWNING):
            owned = set(message[len(OWNING) :].split(" (")[0].split(", "))
            replica.taken = {c: replica.taken.get(c, when) for c in owned}
        elif message.startswith(RELEASING):
            owned.discard(message[len(RELEASING) :].split(":")[0])
        replica.publishes = replica.publishes or publishes
        changes.append(f"t+{when:.1f}s: {message}")
    replica.owned = sorted(owned)
    return changes


@dataclass
class RunResult:
    replicas: int
    seconds: float  # start → every created event acknowledged by Kafka
    clusters: dict[str, ClusterProgress]
    members: list[Replica]
    cpu: dict[str, float]  # CPU seconds per group during the run
    load: float  # the 1-minute load average at the start
    changes: list[list[str]]
    url: str  # its database, kept for the publisher alone
    wal: int  # bytes of WAL PostgreSQL wrote during the run (every database of the server)

    @property
    def rows_done(self) -> float:
        return max(c.rows_done or 0.0 for c in self.clusters.values())


def run(replicas: int, server: PostgresServer, envs: list[TestEnv], pods: int, directory: Path) -> RunResult:
    """Start ``replicas`` processes on a fresh database; wait until every created event is acknowledged."""
    database = fresh_database(server, envs)
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    groups = server_groups(envs, server)
    load = os.getloadavg()[0]
    before, machine_before, wal_before = snapshot(groups), machine_seconds(), wal_position(database)
    started, started_at = time.perf_counter(), time.time()
    members = [start(database, envs, topic, directory / f"r{replicas}-{i}.log") for i in range(replicas)]
    seen: dict[str, ClusterProgress] = {}
    try:
        while not all(c.sent_done is not None for c in seen.values()) or len(seen) < len(CLUSTERS):
            if any(m.process.poll() is not None for m in members):
                raise RuntimeError(f"a replica exited; see {directory}")
            time.sleep(POLL)
            observe(seen, progress(database), pods, time.perf_counter() - started)
        seconds = time.perf_counter() - started
        after, machine = snapshot(groups), machine_seconds() - machine_before
        wal = wal_position(database) - wal_before
        for member in members:
            member.cpu, member.librdkafka = tree_seconds(member.process.pid), librdkafka_seconds(member.process.pid)
    finally:
        for member in members:
            member.process.send_signal(signal.SIGTERM)
        for member in members:
            member.process.wait(60)
        database.dispose()
    cpu = {f"replica {i}": m.cpu for i, m in enumerate(members)} | {k: after[k] - before[k] for k in after}
    cpu["rest of the machine"] = machine - sum(cpu.values())
    changes = [read_log(m, started_at, seconds) for m in members]
    url = database.url.render_as_string(hide_password=False)
    return RunResult(replicas, seconds, seen, members, cpu, load, changes, url, wal)


@dataclass
class Alone:
    events: int
    seconds: float
    relay_cpu: float  # this process: the relay's thread, librdkafka's
    database_cpu: float
    wal: int


def publisher_alone(url: str, envs: list[TestEnv], server: PostgresServer) -> Alone:
    """The relay alone in this process, re-sending a run's outbox (every row made unsent) to a new topic."""
    broker = envs[0].broker
    assert broker is not None and server.process is not None
    database = Database(url)
    with database.engine.begin() as db:
        events = db.execute(sa.text("update event_outbox set sent = null")).rowcount
    relay = OutboxRelay(database, RelayOptions(kafka=broker.bootstrap, topic=f"alone-{uuid.uuid4().hex[:8]}"))
    thread = threading.Thread(target=relay.run, daemon=True)
    own, postgres, wal = psutil.Process().cpu_times(), tree_seconds(server.process.pid), wal_position(database)
    started = time.perf_counter()
    thread.start()
    try:
        while relay.pending or sum(sent for _, sent in progress(database).values()) < events:
            time.sleep(POLL)
        seconds = time.perf_counter() - started
    finally:
        relay.stop()
        thread.join(30)
    after = psutil.Process().cpu_times()
    relay_cpu = after.user + after.system - own.user - own.system
    database_cpu = tree_seconds(server.process.pid) - postgres
    wal = wal_position(database) - wal
    database.dispose()
    return Alone(events, seconds, relay_cpu, database_cpu, wal)


# -- the report -------------------------------------------------------------------------------------


def rows_per_second(result: RunResult, member: Replica, pods: int) -> tuple[int, float]:
    """A replica's pod rows and their rate, from taking its clusters (its last owner) to their last row."""
    marks = [result.clusters[c] for c in member.owned if c in result.clusters]
    if not marks:
        return 0, 0.0
    first = min(member.taken.get(c, 0.0) for c in member.owned)
    last = max(m.rows_done or 0.0 for m in marks)
    rows = pods * len(marks)
    return rows, rows / max(last - first, 1e-9)


def report(result: RunResult, pods: int) -> None:
    cores = os.cpu_count() or 1
    plural = "s" if result.replicas > 1 else ""
    print(f"\n{result.replicas} replica{plural} (1-minute load average at the start: {result.load:.1f})")
    print(f"  inventory done (every pod row written): {result.rows_done:.1f}s")
    print(f"  every created event acknowledged by Kafka: {result.seconds:.1f}s")
    pods_total = pods * len(CLUSTERS)
    print(f"  PostgreSQL WAL: {result.wal / 2**20:.0f} MiB = {result.wal / pods_total / 1024:.1f} KiB per pod")
    for name in CLUSTERS:
        mark = result.clusters[name]
        print(
            f"  cluster {name:<10} first row {mark.first_row or 0:5.1f}s  rows done {mark.rows_done or 0:5.1f}s"
            f"  sent done {mark.sent_done or 0:5.1f}s"
        )
    for i, member in enumerate(result.members):
        rows, rate = rows_per_second(result, member, pods)
        print(
            f"  replica {i}: owns {', '.join(member.owned) or 'nothing'}; {rows} rows at {rate:.0f} rows/s;"
            f" {'publishes' if member.publishes else 'stands by'}; CPU {member.cpu:.1f}s"
            f" (librdkafka threads {member.librdkafka:.1f}s)"
        )
        for change in result.changes[i]:
            print(f"    {change}")
    capacity = result.seconds * cores
    print(f"  CPU seconds during the run ({cores} cores × {result.seconds:.1f}s = {capacity:.1f}s):")
    for name, seconds in result.cpu.items():
        print(f"    {name:<26} {seconds:6.1f}s  {100 * seconds / capacity:3.0f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=5000, help="pods per cluster")
    parser.add_argument("--control-planes", type=int, choices=(1, 2, 4), default=4)
    parser.add_argument("--keep-logs", type=Path, help="a directory to copy the replicas' logs to")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kuberaven-bench-") as name:
        directory = Path(name)
        envs = [TestEnv(directory / f"env{i}", nodes=1, broker=i == 0) for i in range(args.control_planes)]
        server = PostgresServer()
        try:
            for env in envs:
                env.start()
                asyncio.run(fill(env, args.pods))
            server.start()
            one = run(1, server, envs, args.pods, directory)
            two = run(2, server, envs, args.pods, directory)
            alone = publisher_alone(one.url, envs, server)
            if args.keep_logs:
                for log in directory.glob("r*.log"):
                    shutil.copy(log, args.keep_logs)
        finally:
            server.stop()
            for env in envs:
                env.stop()
    for result in (one, two):
        report(result, args.pods)
    print(
        f"\npublisher alone (this process, the 1-replica run's outbox made unsent): {alone.events} events in"
        f" {alone.seconds:.1f}s = {alone.events / alone.seconds:.0f}/s; CPU: relay {alone.relay_cpu:.1f}s"
        f" ({1000 * alone.relay_cpu / alone.events:.2f} ms/event), PostgreSQL {alone.database_cpu:.1f}s,"
        f" WAL {alone.wal / alone.events:.0f} bytes/event"
    )
    label = f"{len(CLUSTERS)} clusters × {args.pods} pods → all created in Kafka"
    inventory = f"{len(CLUSTERS)} clusters × {args.pods} pods → every pod row written"
    print()
    print_table(
        [
            (
                label,
                f"2 replicas: {two.seconds:.1f}s",
                f"1 replica: {one.seconds:.1f}s",
                _ratio(two.seconds, one.seconds),
            ),
            (
                inventory,
                f"2 replicas: {two.rows_done:.1f}s",
                f"1 replica: {one.rows_done:.1f}s",
                _ratio(two.rows_done, one.rows_done),
            ),
        ]
    )


def _ratio(two: float, one: float) -> str:
    return f"{two / one:.2f}× the time (speed-up {one / two:.2f})"


if __name__ == "__main__":
    main()
