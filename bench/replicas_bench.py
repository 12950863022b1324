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

    python bench/replicas_bench.py [--pods 5000] [--control-planes 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

from common import create_namespace_and_node, create_pods, print_table, start_pods
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, KubernetesService
from kuberaven.testing.env import TestEnv
from kuberaven.testing.postgres import PostgresServer
from kuberaven.testing.processes import free_port

CLUSTERS = ["kubernetes", "edge-1", "edge-2", "edge-3"]  # the default row and three more
WRITERS = 16


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


def sent(database: Database) -> int:
    with database.engine.connect() as db:
        query = "select count(*) from event_outbox where status = 'created' and sent is not null"
        return int(db.execute(sa.text(query)).scalar_one())


def start(database: Database, envs: list[TestEnv], topic: str, log: Path) -> subprocess.Popen[bytes]:
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
        return subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)


def run(replicas: int, server: PostgresServer, envs: list[TestEnv], pods: int, directory: Path) -> float:
    """Seconds from starting ``replicas`` processes to every created event acknowledged by Kafka."""
    database = fresh_database(server, envs)
    expected = pods * len(CLUSTERS)
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    processes = [start(database, envs, topic, directory / f"r{replicas}-{i}.log") for i in range(replicas)]
    try:
        while sent(database) < expected:
            if any(p.poll() is not None for p in processes):
                raise RuntimeError(f"a replica exited; see {directory}")
            time.sleep(0.2)
        return time.perf_counter() - started
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(60)
        database.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=5000, help="pods per cluster")
    parser.add_argument("--control-planes", type=int, choices=(1, 2, 4), default=4)
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
        finally:
            server.stop()
            for env in envs:
                env.stop()
    label = f"{len(CLUSTERS)} clusters × {args.pods} pods → all created in Kafka"
    print_table([(label, f"2 replicas: {two:.1f}s", f"1 replica: {one:.1f}s", f"speed-up {one / two:.2f}")])


if __name__ == "__main__":
    main()
