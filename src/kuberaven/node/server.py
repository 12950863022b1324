"""The agent's unix socket (node/): one plugin call per connection, answered by calls.py.

    kuberaven-cni ──connect──► <socket> ──request (until the client's end of writing)──► Calls.answer
                  ◄──────────────────────── answer, then the connection closes ◄──────────┘

The socket's directory is made if missing. A socket file left by an agent
that died is replaced; one that another agent still answers on is not (two
agents would wire the same pods). Stopping closes the socket first (the
plugin then says no agent answers), lets the calls in flight finish for a
bounded time, then cancels what is left: the runtime retries those.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

from ..cni.protocol import LATEST_VERSION, MAX_MESSAGE, ProtocolError, decode_request, encode_answer, error_json
from ..cni.spec import ErrorCode

log = logging.getLogger(__name__)
Answer = Callable[[dict[str, str], str], Awaitable[tuple[int, str]]]
SOCKET_MODE = 0o660  # the runtime (root) calls; nobody else needs to
CHUNK = 65536


class SocketInUse(RuntimeError):
    """Another agent answers on the socket, or the path is not a socket."""


def prepare(path: Path) -> None:
    """Make the socket's directory; remove a stale socket file (no one answers on it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SocketInUse(f"{path} exists and is not a socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError as error:
            if error.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise
        else:
            raise SocketInUse(f"another agent answers on {path}")
    log.info("removing the stale socket %s", path)
    path.unlink(missing_ok=True)


class Server:
    """Serves ``answer`` on the unix socket at ``path`` until close()."""

    def __init__(self, path: Path, answer: Answer) -> None:
        self.path, self.answer = path, answer
        self._server: asyncio.Server | None = None
        self._calls: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        prepare(self.path)
        self._server = await asyncio.start_unix_server(self._connected, str(self.path))
        os.chmod(self.path, SOCKET_MODE)
        log.info("serving kuberaven-cni on %s", self.path)

    async def close(self, grace: float) -> None:
        """Stop accepting, remove the socket, give the calls in flight ``grace`` seconds, cancel the rest."""
        if self._server is not None:
            self._server.close()
            self.path.unlink(missing_ok=True)
        if self._calls:
            log.info("waiting up to %g s for %d calls in flight", grace, len(self._calls))
            _, pending = await asyncio.wait(set(self._calls), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._calls.add(task)
        try:
            answer = await self._answer(await _read_all(reader))
            writer.write(answer)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError) as error:
            log.warning("the plugin went away before its answer: %s", error)
        finally:
            self._calls.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, data: bytes) -> bytes:
        try:
            environ, config = decode_request(data)
        except ProtocolError as error:
            return encode_answer(1, error_json(LATEST_VERSION, ErrorCode.DECODE_FAILURE, str(error)))
        code, stdout = await self.answer(environ, config)
        return encode_answer(code, stdout)


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    """Everything until the client's end of writing, at most MAX_MESSAGE + 1 bytes (decode_request refuses more)."""
    received = bytearray()
    while len(received) <= MAX_MESSAGE and (chunk := await reader.read(CHUNK)):
        received += chunk
    return bytes(received)
