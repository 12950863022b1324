"""A TCP forwarder from a network namespace's loopback to the root one's (test infrastructure).

The control plane listens on 127.0.0.1 of the root netns, which a process inside a node's netns cannot reach.
kube-proxy must run inside that netns (its iptables rules are the node's), so this listens on 127.0.0.1:<port>
there and forwards each connection to 127.0.0.1:<port> here: the environment's kubeconfig serves unchanged
(same address, same certificate). The listening socket is made inside the netns and the process returns to its
own netns before connecting out: a socket keeps the netns it was made in.

    python -m kuberaven.testing.netns_forward <netns> <port>
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import socket
import sys
from contextlib import suppress

CLONE_NEWNET = 0x40000000  # setns(2)'s namespace type for a network namespace
LOOPBACK = "127.0.0.1"
CHUNK = 65536  # bytes read at a time from either side
BACKLOG = 64


def _setns(path: str) -> None:
    """Move this (single-threaded) process into the network namespace at ``path``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns {path}: {os.strerror(error)}")
    finally:
        os.close(fd)


def listen_in(netns: str, port: int) -> socket.socket:
    """A socket listening on LOOPBACK:``port`` of ``netns``; the process stays in (returns to) its own netns."""
    home = f"/proc/{os.getpid()}/ns/net"
    own = os.open(home, os.O_RDONLY)
    try:
        _setns(f"/run/netns/{netns}")
        try:
            listener = socket.create_server((LOOPBACK, port), backlog=BACKLOG)
        finally:
            _setns(f"/proc/self/fd/{own}")
    finally:
        os.close(own)
    listener.setblocking(False)
    return listener


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with suppress(ConnectionError, OSError):
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    with suppress(ConnectionError, OSError):
        writer.close()


async def serve(listener: socket.socket, port: int) -> None:
    """Forward every connection to ``listener`` to LOOPBACK:``port`` of this process' netns, both ways."""

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(LOOPBACK, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    server = await asyncio.start_server(forward, sock=listener)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    target_netns, target_port = sys.argv[1], int(sys.argv[2])
    asyncio.run(serve(listen_in(target_netns, target_port), target_port))
