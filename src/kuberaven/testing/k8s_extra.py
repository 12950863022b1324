"""Builds Kubernetes components beyond the control plane's three on demand (test infrastructure).

kube-proxy serves node ports beside kuberaven (docs/network.md, "Node ports"); only an environment that asks
for node ports needs it. It is built from the same Debian ``kubernetes`` source into the same cache directory as
the control plane (``k8s_build.cache_dir()``), under a lock of its own, and only when it is missing: a cache
that already holds kube-apiserver, kube-controller-manager and kube-scheduler keeps them as they are, and their
check (``k8s_build.binaries``) does not look at the extra components.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .k8s_build import RETRY_HINT, BuildError, check_tools, checked_cache_dir, prepare_tree, run_step

EXTRA_COMPONENTS = ("kube-proxy",)
EXTRA_LOG = "build-{component}.log"  # in the cache directory, beside the control plane's build.log


def extra_binary(component: str, build_if_missing: bool = True) -> Path:
    """The path of ``component`` (one of EXTRA_COMPONENTS), built into the cache first when missing.

    ``KUBEBUILDER_ASSETS`` names a directory that must hold it, as for the control plane's binaries."""
    if component not in EXTRA_COMPONENTS:
        raise ValueError(f"{component} is not one of {', '.join(EXTRA_COMPONENTS)}")
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        path = Path(assets) / component
        if not path.is_file():
            raise BuildError(f"KUBEBUILDER_ASSETS={assets} lacks {component}")
        return path
    directory = checked_cache_dir()
    path = directory / component
    if not path.is_file():
        if not build_if_missing:
            raise BuildError(f"no {component} in {directory}; {RETRY_HINT}")
        with _component_lock(directory, component):  # test workers at once: one builds, the others wait
            if not path.is_file():
                build_component(directory, component)
    return path


@contextlib.contextmanager
def _component_lock(directory: Path, component: str) -> Iterator[None]:
    """A lock beside the cache directory for this component alone: the control plane's build is not held up."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f"{directory.name}.{component}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build_component(target: Path, component: str) -> None:
    """Build ``cmd/<component>`` from Debian's kubernetes source and copy it into ``target`` (atomically: a
    half-copied binary is never found by ``extra_binary``)."""
    check_tools()
    target.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"kuberaven-{component}-build-", dir=target.parent))
    try:
        log = target / EXTRA_LOG.format(component=component)
        log.write_text("")
        tree, env = prepare_tree(work, log)
        run_step("go build", ["make", f"WHAT=cmd/{component}"], tree, log, env)
        partial = target / f".{component}.partial"
        shutil.copy2(tree / "_output" / "bin" / component, partial)
        partial.rename(target / component)
    finally:
        shutil.rmtree(work, ignore_errors=True)
