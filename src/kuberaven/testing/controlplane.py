"""The local Kubernetes control plane (testing/: tests, benchmarks and `make run`).

etcd + kube-apiserver + kube-controller-manager + kube-scheduler on free
127.0.0.1 ports, token auth and RBAC, a kubeconfig in ``<dir>/kubeconfig``.
There is no kubelet: :mod:`kuberaven.testing.kubelet` stands in for nodes.
Tests may restart, pause (SIGSTOP) and resume the API server and compact etcd
to provoke the failures the watcher must survive.
"""

from __future__ import annotations

import base64
import json
import secrets
import signal
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import yaml

from .free_ports import free_port
from .k8s_build import Binaries, binaries
from .processes import Process, stop_all, wait_for

SERVICE_CIDR = "10.0.0.0/24"
# The API server and the controllers keep nothing (etcd does): a stop need not wait out a graceful end,
# whose open watches have held the API server up to its SIGKILL.
STATELESS_STOP_TIMEOUT = 3.0


class ControlPlane:
    def __init__(self, directory: Path, bins: Binaries | None = None, extra_apiserver_args: list[str] | None = None):
        self.dir = Path(directory)
        self.bins = bins or binaries()
        self.token = secrets.token_hex(16)
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.apiserver_port = free_port()
        self.extra_apiserver_args = extra_apiserver_args or []
        self.etcd: Process | None = None
        self.apiserver: Process | None = None
        self.controller_manager: Process | None = None
        self.scheduler: Process | None = None

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(exist_ok=True)
        self._write_credentials()
        self._start_etcd()
        self.start_apiserver()
        self._write_kubeconfig()
        self._start_controllers()

    def stop(self) -> None:
        # Together: a control plane thrown away needs no orderly stop (etcd's data goes with the directory).
        stop_all(p for p in (self.scheduler, self.controller_manager, self.apiserver, self.etcd) if p is not None)

    def processes(self) -> list[Process]:
        return [p for p in (self.etcd, self.apiserver, self.controller_manager, self.scheduler) if p]

    # -- credentials -------------------------------------------------------------------------------
    def _write_credentials(self) -> None:
        (self.dir / "tokens.csv").write_text(f'{self.token},admin,admin,"system:masters"\n')
        key = self.dir / "sa.key"
        if not key.exists():
            subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
            subprocess.run(
                ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(self.dir / "sa.pub")],
                check=True,
                capture_output=True,
            )

    def _write_kubeconfig(self) -> None:
        ca = (self.dir / "certs" / "apiserver.crt").read_bytes()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": base64.b64encode(ca).decode(),
                    },
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))

    # -- processes ----------------------------------------------------------------------------------
    def _start_etcd(self) -> None:
        self.etcd = Process(
            "etcd",
            [
                str(self.bins.etcd),
                "--data-dir",
                str(self.dir / "etcd"),
                "--listen-client-urls",
                self.etcd_url,
                "--advertise-client-urls",
                self.etcd_url,
                "--listen-peer-urls",
                f"http://127.0.0.1:{self.etcd_peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{self.etcd_peer_port}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{self.etcd_peer_port}",
                "--unsafe-no-fsync",
                "--quota-backend-bytes",
                str(4 * 1024**3),
            ],
            self.dir / "logs",
        )
        self.etcd.start()
        wait_for(lambda: self._http_ok(f"{self.etcd_url}/health"), 30, "etcd", process=self.etcd)

    def start_apiserver(self) -> None:
        self.apiserver = Process(
            "kube-apiserver",
            [
                str(self.bins.kube_apiserver),
                "--etcd-servers",
                self.etcd_url,
                "--bind-address",
                "127.0.0.1",
                "--advertise-address",
                "127.0.0.1",
                "--secure-port",
                str(self.apiserver_port),
                "--cert-dir",
                str(self.dir / "certs"),
                "--token-auth-file",
                str(self.dir / "tokens.csv"),
                "--authorization-mode",
                "RBAC",
                "--service-account-key-file",
                str(self.dir / "sa.pub"),
                "--service-account-signing-key-file",
                str(self.dir / "sa.key"),
                "--service-account-issuer",
                "https://kubernetes.default.svc",
                "--service-cluster-ip-range",
                SERVICE_CIDR,
                "--insecure-port",
                "0",
                "--max-requests-inflight",
                "1000",
                "--max-mutating-requests-inflight",
                "500",
                *self.extra_apiserver_args,
            ],
            self.dir / "logs",
            stop_timeout=STATELESS_STOP_TIMEOUT,
        )
        self.apiserver.start()
        wait_for(self.readyz, 60, "kube-apiserver", interval=0.2, process=self.apiserver)

    def _start_controllers(self) -> None:
        common = [
            "--kubeconfig",
            str(self.kubeconfig),
            "--leader-elect=false",
            "--kube-api-qps",
            "500",
            "--kube-api-burst",
            "1000",
        ]
        self.controller_manager = Process(
            "kube-controller-manager",
            [
                str(self.bins.kube_controller_manager),
                *common,
                "--controllers",
                "*,-nodelifecycle",
                "--service-account-private-key-file",
                str(self.dir / "sa.key"),
                "--root-ca-file",
                str(self.dir / "certs" / "apiserver.crt"),
                "--use-service-account-credentials=false",
                "--port",
                "0",
                "--secure-port",
                str(free_port()),
            ],
            self.dir / "logs",
            stop_timeout=STATELESS_STOP_TIMEOUT,
        )
        self.scheduler = Process(
            "kube-scheduler",
            [str(self.bins.kube_scheduler), *common, "--port", "0", "--secure-port", str(free_port())],
            self.dir / "logs",
            stop_timeout=STATELESS_STOP_TIMEOUT,
        )
        self.controller_manager.start()
        self.scheduler.start()

    # -- failure injection for tests ----------------------------------------------------------------
    def kill_apiserver(self) -> None:
        assert self.apiserver is not None
        self.apiserver.signal(signal.SIGKILL)
        assert self.apiserver.popen is not None
        self.apiserver.popen.wait()

    def restart_apiserver(self) -> float:
        """Kill the API server (SIGKILL, as upstream's e2e `RestartApiserver` kills its container) and start it
        again with the same flags, port, certificates and etcd; return once /readyz answers again, with the
        seconds it was down (from the kill to that answer). The new process is a child of the calling thread:
        it gets SIGKILL when that thread ends (processes.py), so call this from the thread that started."""
        started = time.monotonic()
        self.kill_apiserver()
        self.start_apiserver()
        return time.monotonic() - started

    def pause_apiserver(self) -> None:
        assert self.apiserver is not None
        self.apiserver.signal(signal.SIGSTOP)

    def resume_apiserver(self) -> None:
        assert self.apiserver is not None
        self.apiserver.signal(signal.SIGCONT)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now; returns the revision compacted to."""
        header = self._etcd_post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]
        revision = int(header["revision"])
        self._etcd_post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    # -- helpers -------------------------------------------------------------------------------------
    def _etcd_post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            self.etcd_url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)

    def readyz(self) -> bool:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        request = urllib.request.Request(f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return response.status == 200

    @staticmethod
    def _http_ok(url: str) -> bool:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
