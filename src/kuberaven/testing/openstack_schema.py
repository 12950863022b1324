"""The local OpenStack's MariaDB data directory with Neutron's and Octavia's schemas, made once and cached.

    openstack.py ──► entry(key, build) ── published ──────────────────────────────► restore into its directory
                                       └─ missing: the cache's lock ─┬─ published meanwhile ─┘
                                                                     └─ build(.building-*/db) ─ rename ─► key/

``mariadb-install-db`` and the few hundred Alembic migrations of
``neutron-db-manage upgrade heads`` and ``octavia-db-manage upgrade head``
cost ≈30 s of CPU on every start of a local OpenStack; the ≈230 tables they
leave cost ≈10 s to load even from a dump. What they make depends only on the
installed packages, so the first start makes the data directory, shut down
cleanly, in ``~/.cache/kuberaven/openstack-db/<key>/`` (``XDG_CACHE_HOME``
moves it), keyed by those packages' versions, and later starts copy it.

Several processes may start at once (the test workers, two environments
sharing a cache): one builds while holding the cache's lock (``.lock``, an
flock, released by the kernel when its holder dies) and the others wait for
it and reuse its entry. The build writes into a directory of its own beside
the entries (``.building-*``), and the entry appears by one rename once it is
whole, so a directory named after a key is always complete: a builder that
dies leaves only its ``.building-*`` directory, which the next builder removes
(under the lock no other build runs). Without ``dpkg-query`` (no version to
key on) every start builds its own, uncached.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from .cache_lock import locked

# The packages whose programs make the data directory: a new version of one is a new cache entry.
SCHEMA_PACKAGES = ("mariadb-server", "python3-neutron", "python3-octavia")
CACHE_FORMAT = "1"  # bumped when what an entry holds changes
LOCK_NAME = ".lock"  # in the cache's directory: held by the one process building an entry
BUILDING_PREFIX = ".building-"  # an entry being built, beside the published ones: never read


def cache_directory() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kuberaven" / "openstack-db"


def cache_key() -> str | None:
    """The installed packages' versions, hashed; None when they cannot be read."""
    try:
        result = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package} ${Version}\n", *SCHEMA_PACKAGES],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    if result.returncode != 0:
        return None
    return hashlib.sha256(f"{CACHE_FORMAT}\n{result.stdout}".encode()).hexdigest()[:16]


def entry(key: str, build: Callable[[Path], None]) -> Path:
    """The cache's data directory for ``key``: the published one, else one made by ``build(datadir)`` (into a
    path that does not exist yet, beside the entries) and published whole. A failed build publishes nothing."""
    root = cache_directory()
    published = root / key
    if published.is_dir():
        return published
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / LOCK_NAME):
        if published.is_dir():  # built by the process this one waited for
            return published
        _remove_abandoned(root)
        work = Path(tempfile.mkdtemp(dir=root, prefix=BUILDING_PREFIX))
        try:
            build(work / "db")
            try:
                os.rename(work / "db", published)
            except OSError:
                if not published.is_dir():  # else published by a process that takes no lock: theirs is as whole
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return published


def _remove_abandoned(root: Path) -> None:
    """Builds whose process died before publishing: only a lock holder builds, and this one holds it."""
    for abandoned in root.glob(f"{BUILDING_PREFIX}*"):
        shutil.rmtree(abandoned, ignore_errors=True)


def restore(source: Path, datadir: Path) -> None:
    shutil.copytree(source, datadir, symlinks=True)


def run_together(commands: Sequence[tuple[str, list[str]]]) -> None:
    """Commands that need no order among them (the two databases' migrations): at once, each checked;
    RuntimeError naming each that failed, with the end of its output."""
    started = [
        (what, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for what, argv in commands
    ]
    failures = []
    for what, process in started:
        output, _ = process.communicate()
        if process.returncode != 0:
            failures.append(f"{what} failed: {output.strip()[-2000:]}")
    if failures:
        raise RuntimeError("\n".join(failures))
