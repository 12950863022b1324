"""The lock of a cache that several processes may fill at once (testing/): the OpenStack database's
(openstack_schema.py) and the VM guest's (vm_image.py), each built by one process while the others wait."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Held until the block ends or the process dies (flock: the kernel releases it, so no stale lock)."""
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
