"""The process's C heap (runtime/, called once as ``kuberaven run`` starts, before any thread).

glibc's malloc gives each thread that allocates while another holds the lock
an arena of its own, up to 8 per core, and memory freed in one arena is
reused only by allocations that land in that same arena. The daemon's
threads (asyncio's workers for database work, the relay's, librdkafka's)
each grew an arena that stayed at its high-water mark: a profile of
a 3,000-pod cold start saw about 20 MiB more resident memory with the
default than with one arena, for the same live objects. Python holds the GIL
for almost all of its allocations, so the lock the extra arenas avoid is
hardly contended; the second arena is for librdkafka's threads, which
allocate without the GIL.

The same call fixes malloc's mmap and trim thresholds at 128 KiB (glibc's
starting values). Left alone, glibc raises both each time a block it had
mapped is freed (up to 32 MiB): after the cold start's first LIST pages
(a response body of a few MiB each) every later page and batch of that size
comes from the heap and its freed top is not given back. With the thresholds
fixed, blocks of 128 KiB or more are mapped and unmapped, and a free top of the heap over
128 KiB is returned: a measurement found about 2 MiB less peak
RSS over a 10,000-pod cold start (single runs) and a lower idle after it
(docs/benchmarks.md).

``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_``
in the environment (glibc's own settings) win over this.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # mallopt's parameter numbers (glibc malloc.h)
M_MMAP_THRESHOLD = -3
M_TRIM_THRESHOLD = -1
ARENA_MAX = 2
THRESHOLD = 128 * 1024  # bytes: glibc's default starting value of both, kept from rising
ENVIRONMENT = "MALLOC_ARENA_MAX"
THRESHOLDS = {M_MMAP_THRESHOLD: "MALLOC_MMAP_THRESHOLD_", M_TRIM_THRESHOLD: "MALLOC_TRIM_THRESHOLD_"}


def configure_malloc(arenas: int = ARENA_MAX) -> bool:
    """Cap glibc malloc's arenas at ``arenas`` and fix its mmap and trim thresholds (each unless the environment
    sets it); True when the arenas were capped, False when this is not glibc or the environment sets them."""
    mallopt = _mallopt()
    if mallopt is None:
        return False
    for parameter, variable in THRESHOLDS.items():
        if not os.environ.get(variable):
            mallopt(parameter, THRESHOLD)
    if os.environ.get(ENVIRONMENT):
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))


def _mallopt() -> Callable[[int, int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        log.debug("no glibc mallopt here (%s): malloc left as it is", name)
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt  # type: ignore[no-any-return]  # ctypes' foreign functions are untyped
