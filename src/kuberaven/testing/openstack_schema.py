"""The local OpenStack's MariaDB data directory with Neutron's and Octavia's schemas, made once and cached.

    openstack.py ──► cached(key) ── hit ──► copy into the environment's directory ──► mariadbd
                               └─ miss ─► mariadb-install-db, mariadbd, neutron-db-manage ∥ octavia-db-manage,
                                          clean shutdown ──► store(key) ──► mariadbd again

``mariadb-install-db`` and the few hundred Alembic migrations of
``neutron-db-manage upgrade heads`` and ``octavia-db-manage upgrade head``
cost ≈30 s of CPU on every start of a local OpenStack; the ≈230 tables they
leave cost ≈10 s to load even from a dump. What they make depends only on the
installed packages, so the first start copies the data directory, shut down
cleanly, into ``~/.cache/kuberaven/openstack-db/<key>/`` (``XDG_CACHE_HOME``
moves it), keyed by those packages' versions, and later starts copy it back.
An entry is written whole or not at all (a rename), so two processes starting
at once both migrate and the cache stays sound. Without ``dpkg-query`` (no
version to key on) every start migrates.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

# The packages whose programs make the data directory: a new version of one is a new cache entry.
SCHEMA_PACKAGES = ("mariadb-server", "python3-neutron", "python3-octavia")
CACHE_FORMAT = "1"  # bumped when what an entry holds changes


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


def cached(key: str | None) -> Path | None:
    """The cached data directory for ``key``, if one was stored."""
    if key is None:
        return None
    entry = cache_directory() / key
    return entry if entry.is_dir() else None


def restore(entry: Path, datadir: Path) -> None:
    shutil.copytree(entry, datadir, symlinks=True)


def store(key: str | None, datadir: Path) -> None:
    """Copy ``datadir`` (its server shut down cleanly) into the cache as ``key``'s entry."""
    if key is None:
        return
    root = cache_directory()
    root.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=root, prefix=".partial-"))
    try:
        shutil.copytree(datadir, partial / "db", symlinks=True)
        with contextlib.suppress(OSError):  # another process stored the same entry meanwhile: keep theirs
            os.rename(partial / "db", root / key)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


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
