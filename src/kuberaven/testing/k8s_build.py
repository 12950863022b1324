"""Builds the local control plane's binaries (test infrastructure, not the flow).

kube-apiserver, kube-controller-manager and kube-scheduler are built once from
Debian's own ``kubernetes`` source package with Debian's golang-go and cached
under ``~/.cache/kuberaven/k8s-v1.20.2/`` (``KUBERAVEN_K8S_CACHE`` overrides).
``KUBEBUILDER_ASSETS`` (the envtest convention) points at other binaries
instead and skips the build entirely. Components only some environments run
(kube-proxy) are built on demand into the same cache by testing/k8s_extra.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

K8S_VERSION = "1.20.2"
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
# Debian ships reflect2 1.0.2 as Go source; the vendored 1.0.1 crashes
# kube-apiserver under Go >= 1.18 ("fatal error: fault" in mapiternext).
REFLECT2_SOURCE = Path("/usr/share/gocode/src/github.com/modern-go/reflect2")
CACHE_VARIABLE = "KUBERAVEN_K8S_CACHE"  # where the binaries are built and kept, instead of the default
RETRY_HINT = "fix the cause and run `make k8s` (or `kuberaven testenv build`) to retry"


class BuildError(RuntimeError):
    """The Kubernetes build failed; the message says which step and how to retry."""


class CacheLocationError(BuildError):
    """The cache's location cannot hold the binaries (it, or a folder above it, is a file): a setting to fix,
    found before anything is written there."""


@dataclass(frozen=True)
class Binaries:
    """Where the control plane's executables live."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    etcd: Path


def cache_dir() -> Path:
    base = os.environ.get(CACHE_VARIABLE)
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kuberaven" / f"k8s-v{K8S_VERSION}"


def checked_cache_dir() -> Path:
    """``cache_dir()``, or CacheLocationError when it or a folder above it is not a directory: checked before
    the build's lock file (beside it) or the build itself (into it) writes anything."""
    directory = cache_dir()
    blocking = next((p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        where = f"{CACHE_VARIABLE}={directory}" if os.environ.get(CACHE_VARIABLE) else f"the cache {directory}"
        what = "is a file" if blocking == directory else f"lies under the file {blocking}"
        raise CacheLocationError(f"{where} {what}, not a directory: point {CACHE_VARIABLE} at a directory")
    return directory


def find_etcd(extra_dirs: list[Path]) -> Path:
    for directory in extra_dirs:
        if (directory / "etcd").is_file():
            return directory / "etcd"
    found = shutil.which("etcd")
    if found:
        return Path(found)
    raise BuildError("etcd not found: install Debian's etcd-server (`make deps`) or set KUBEBUILDER_ASSETS")


def binaries(build_if_missing: bool = True) -> Binaries:
    """Return the control plane binaries, building them into the cache if needed."""
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        directory = Path(assets)
        missing = [c for c in COMPONENTS if not (directory / c).is_file()]
        if missing:
            raise BuildError(f"KUBEBUILDER_ASSETS={directory} lacks {', '.join(missing)}")
    else:
        directory = checked_cache_dir()
        if not all((directory / c).is_file() for c in COMPONENTS):
            if not build_if_missing:
                raise BuildError(f"no Kubernetes binaries in {directory}; {RETRY_HINT}")
            with _build_lock(directory):  # several processes at once (test workers): one builds, the others wait
                if not all((directory / c).is_file() for c in COMPONENTS):
                    build(directory)
    return Binaries(
        kube_apiserver=directory / "kube-apiserver",
        kube_controller_manager=directory / "kube-controller-manager",
        kube_scheduler=directory / "kube-scheduler",
        etcd=find_etcd([directory]),
    )


@contextlib.contextmanager
def _build_lock(directory: Path) -> Iterator[None]:
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f"{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run_step(step: str, args: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(args)}\n")
        out.flush()
        result = subprocess.run(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        raise BuildError(
            f"Kubernetes build step '{step}' failed (exit {result.returncode}); "
            f"last lines of {log}:\n" + "\n".join(tail) + f"\n{RETRY_HINT}"
        )


def _swap_reflect2(tree: Path) -> None:
    vendored = tree / "vendor" / "github.com" / "modern-go" / "reflect2"
    if not REFLECT2_SOURCE.is_dir():
        raise BuildError(f"{REFLECT2_SOURCE} missing: install golang-github-modern-go-reflect2-dev; {RETRY_HINT}")
    for old in list(vendored.glob("*.go")) + list(vendored.glob("*.s")):
        old.unlink()
    for new in list(REFLECT2_SOURCE.glob("*.go")) + list(REFLECT2_SOURCE.glob("*.s")):
        if not new.name.endswith("_test.go"):
            shutil.copy2(new, vendored / new.name)


def check_tools() -> None:
    """BuildError naming the first tool of the build that is missing, before anything is written."""
    for tool in ("go", "apt-get", "make", "rsync"):
        if shutil.which(tool) is None:
            raise BuildError(f"'{tool}' not found: run `make deps` first; {RETRY_HINT}")


def prepare_tree(work: Path, log: Path) -> tuple[Path, dict[str, str]]:
    """Download and unpack Debian's kubernetes source in ``work``; return the tree and the build's environment."""
    run_step("apt-get source", ["apt-get", "source", "--download-only", "kubernetes"], work, log)
    tarballs = sorted(work.glob("kubernetes_*.orig.tar.gz"))
    if not tarballs:
        raise BuildError(f"apt-get source left no kubernetes_*.orig.tar.gz in {work}; {RETRY_HINT}")
    run_step("unpack", ["tar", "xzf", tarballs[0].name], work, log)
    tree = work / f"kubernetes-{K8S_VERSION}"
    if not tree.is_dir():
        raise BuildError(f"expected {tree} after unpacking {tarballs[0].name}; {RETRY_HINT}")
    _swap_reflect2(tree)
    gopath = tree / ".go"
    (gopath / "src" / "k8s.io").mkdir(parents=True, exist_ok=True)
    (gopath / "src" / "k8s.io" / "kubernetes").symlink_to(tree)
    env = {
        **os.environ,
        "GOPATH": str(gopath),
        "CGO_ENABLED": "0",
        "HOME": str(work / "home"),
    }
    return tree, env


def build(target: Path) -> None:
    """Download Debian's kubernetes source, build the three components, cache them."""
    check_tools()
    target.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kuberaven-k8s-build-", dir=target.parent))
    try:
        log = target / "build.log"
        log.write_text("")
        tree, env = prepare_tree(work, log)
        what = " ".join(f"cmd/{c}" for c in COMPONENTS)
        run_step("go build", ["make", f"WHAT={what}"], tree, log, env)
        for component in COMPONENTS:
            shutil.copy2(tree / "_output" / "bin" / component, target / component)
    finally:
        shutil.rmtree(work, ignore_errors=True)
