"""The HTTP server of ``kuberaven run`` (web/): uvicorn serving one ASGI app as a component of the supervisor.

    Supervisor ──run()/stop()──► WebServer ──► uvicorn ──► the app (the daemon's: probes.py's ProbesApp)

Apart from app.py so that the daemon does not import FastAPI to serve its probes.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import uvicorn

from ..component_status import ComponentStatus
from .probes import ASGIApp


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The daemon owns SIGINT/SIGTERM and stops the server itself.
        yield


class WebServer:
    """The HTTP server as a component of the daemon: each run() binds ``listen`` and serves a new uvicorn server.

    Binding here (not in uvicorn, which calls sys.exit when the port is taken)
    makes a taken port an ordinary crash that the supervisor retries.
    """

    name = "web"
    stop_last = True  # /readyz answers while the loops stop

    def __init__(self, listen: str, app: ASGIApp) -> None:
        host, _, port = listen.rpartition(":")
        self.host = (host or "127.0.0.1").strip("[]")
        self.port = int(port)
        self.app = app
        self._server: uvicorn.Server | None = None
        self._stopping = False

    async def run(self) -> None:
        # No WebSocket route exists: ws="none" spares importing a WebSocket library.
        config = uvicorn.Config(
            self.app, host=self.host, port=self.port, log_level="warning", lifespan="off", ws="none"
        )
        self._server = server = _Server(config)
        server.should_exit = self._stopping
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        with socket.create_server((self.host, self.port), family=family) as sock:
            try:
                await server.serve(sockets=[sock])
            except SystemExit:
                raise RuntimeError(f"the web server on {self.host}:{self.port} could not start") from None

    def stop(self) -> None:
        self._stopping = True
        if self._server is not None:
            self._server.should_exit = True

    def ready(self) -> bool:
        return self._server is not None and self._server.started

    def status(self) -> list[ComponentStatus]:
        return []
