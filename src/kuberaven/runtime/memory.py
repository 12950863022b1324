"""The process's C heap (runtime/, called once as ``kuberaven run`` starts, before any thread).

glibc's malloc gives each thread that allocates while another holds the lock
an arena of its own, up to 8 per core, and memory freed in one arena is
reused only by allocations that land in that same arena. The daemon's
threads (asyncio's workers for database work, the relay's, librdkafka's)
each grew an arena that stayed at its high-water mark: issue 26's profile of
a 3,000-pod cold start saw about 20 MiB more resident memory with the
default than with one arena, for the same live objects. Python holds the GIL
for almost all of its allocations, so the lock the extra arenas avoid is
hardly contended; the second arena is for librdkafka's threads, which
allocate without the GIL.

``MALLOC_ARENA_MAX`` in the environment (glibc's own setting) wins over this.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # mallopt's parameter number (glibc malloc.h)
ARENA_MAX = 2
ENVIRONMENT = "MALLOC_ARENA_MAX"


def limit_malloc_arenas(arenas: int = ARENA_MAX) -> bool:
    """Cap glibc malloc's arenas at ``arenas``; False when this is not glibc or the environment sets it."""
    if os.environ.get(ENVIRONMENT):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        log.debug("no glibc mallopt here (%s): malloc's arenas left as they are", name)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_ARENA_MAX, arenas))
