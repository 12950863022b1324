"""Who holds a TCP port (entry point: `kuberaven run` refuses a busy --listen address before any work).

Without this check a second `kuberaven run` would start, attach to the same local cluster and database,
and fail 15 s later with five tracebacks. Binding the address first tells at once; the holder is found the way
``ss -ltnp`` finds it: the listening socket's inode in /proc/net/tcp{,6}, then the process with a
file descriptor on that socket.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

_LISTEN = "0A"  # the TCP_LISTEN state in /proc/net/tcp
_SHOWN_ARGS = 4  # of the holder's command line: enough to recognise `kuberaven run --listen …`


def listen_conflict(listen: str) -> str | None:
    """None when HOST:PORT can be listened on; else one line naming the address and what holds it."""
    host, _, port_text = listen.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (ValueError, OSError):
        return None  # not ours to judge: the server reports a bad address itself
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: TIME_WAIT is no conflict
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                return None
            return f"{listen} is in use by {port_holder(port)}"
    return None


def port_holder(port: int) -> str:
    """``pid N (command)`` of the process listening on ``port``, or ``another process`` if not visible."""
    inodes = listening_inodes(port)
    for pid, inode in _socket_owners():
        if inode in inodes:
            return f"pid {pid} ({command_of(pid)})"
    return "another process"


def listening_inodes(port: int, proc: Path = Path("/proc")) -> set[str]:
    """Inodes of the sockets listening on ``port`` (any address, IPv4 or IPv6)."""
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        found.update(parse_listeners(lines, port))
    return found


def parse_listeners(lines: list[str], port: int) -> set[str]:
    """From /proc/net/tcp lines (``sl local rem st … inode``), the inodes of LISTEN sockets on ``port``."""
    found = set()
    for line in lines:
        fields = line.split()
        if len(fields) < 10:
            continue
        local, state, inode = fields[1], fields[3], fields[9]
        if state == _LISTEN and int(local.rpartition(":")[2], 16) == port:
            found.add(inode)
    return found


def _socket_owners() -> list[tuple[int, str]]:
    """(pid, socket inode) for every socket descriptor this user may look at."""
    owners: list[tuple[int, str]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue  # gone, or another user's
        owners.extend((int(entry.name), link[8:-1]) for link in links if link.startswith("socket:["))
    return owners


def command_of(pid: int) -> str:
    """A short command line: ``kuberaven run`` rather than ``/…/python3 -m kuberaven run``."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return "unknown command"
    return short_command([a for a in args if a])


def short_command(args: list[str]) -> str:
    """The interpreter and ``-m`` left out, the program without its directory."""
    if len(args) > 1 and Path(args[0]).name.startswith("python"):
        if args[1] == "-m" and len(args) > 2:
            args = args[2:]
        elif not args[1].startswith("-"):
            args = args[1:]  # a script: its name says more than the interpreter's
    if not args:
        return "unknown command"
    return " ".join(" ".join([Path(args[0]).name, *args[1:_SHOWN_ARGS]]).split())  # one line, whatever the args
