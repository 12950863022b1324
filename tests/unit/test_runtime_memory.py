"""runtime/memory.py: glibc malloc's arenas capped in the daemon's process, unless the environment sets them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kuberaven.runtime.memory import ENVIRONMENT, configure_malloc


def _in_child(code: str, **env: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


def test_the_cap_is_set_on_glibc() -> None:
    assert _in_child("from kuberaven.runtime.memory import configure_malloc as f; print(f())") == "True"


def test_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENVIRONMENT, "4")
    assert configure_malloc() is False


def test_threads_share_the_capped_arenas() -> None:
    # Eight threads that each allocate at once: with the cap, malloc_stats lists no more than two arenas.
    code = (
        "import ctypes, threading\n"
        "from kuberaven.runtime.memory import configure_malloc\n"
        "configure_malloc()\n"
        "def work():\n    [bytearray(100_000) for _ in range(200)]\n"
        "threads = [threading.Thread(target=work) for _ in range(8)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "ctypes.CDLL('libc.so.6').malloc_stats()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    arenas = [line for line in done.stderr.splitlines() if line.startswith("Arena ")]
    assert 1 <= len(arenas) <= 2, done.stderr


# glibc's mallinfo2 (2.33+): hblkhd is the bytes held in mapped blocks.
_MAPPED = (
    "import ctypes\n"
    "class Info(ctypes.Structure):\n"
    "    _fields_ = [(n, ctypes.c_size_t) for n in "
    "('arena','ordblks','smblks','hblks','hblkhd','usmblks','fsmblks','uordblks','fordblks','keepcost')]\n"
    "libc = ctypes.CDLL('libc.so.6'); libc.mallinfo2.restype = Info\n"
    "{setup}\n"
    "first = bytearray(4 << 20); del first\n"  # a freed mapped block: glibc alone raises its threshold to 4 MiB
    "later = bytearray(1 << 20)\n"
    "print(libc.mallinfo2().hblkhd >= 1 << 20)\n"
)


def test_the_mmap_threshold_stays_fixed() -> None:
    # After a large mapped block is freed, a later 1 MiB block is still mapped (so given back when freed).
    setup = "from kuberaven.runtime.memory import configure_malloc; configure_malloc()"
    assert _in_child(_MAPPED.format(setup=setup)) == "True"


def test_without_it_glibc_raises_the_threshold() -> None:
    # The control: the same allocations without the call put the later block on the heap.
    assert _in_child(_MAPPED.format(setup="")) == "False"


def test_the_environment_wins_over_the_thresholds() -> None:
    setup = "from kuberaven.runtime.memory import configure_malloc; configure_malloc()"
    assert _in_child(_MAPPED.format(setup=setup), MALLOC_MMAP_THRESHOLD_="8388608") == "False"
