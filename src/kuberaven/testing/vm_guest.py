"""The control channel of a nested node's VM (testing/): a command server inside the guest, and its wire format.

    host: vm_exec.py ── TCP 127.0.0.1:<port> ══ QEMU user-mode network (hostfwd) ══► guest 10.0.2.15:<port>: serve()
          REQUEST {token, argv, env, stdin} ──►  the command runs in the guest (its own process group)
          ◄── STDOUT / STDERR chunks as they come, then EXIT <code> (128 + signal if one ended it)
          the client hangs up first ──► the command's whole group is SIGKILLed
    guest 127.0.0.1:<api port> ──► relay ──► 10.0.2.2:<api port> (user-mode networking: the host's 127.0.0.1)

The relays let the guest's node agent use the environment's kubeconfig
unchanged (same address, same certificate), as testing/netns_forward.py does
for a node's netns. This module runs in the guest with the host's Python
(``python -I -S``, stdlib only: every import costs seconds under emulation)
and is imported by the host's client for the frames.

    python -I -S vm_guest.py /vm/guest.json
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from typing import Any

REQUEST, STDOUT, STDERR, EXIT, ERROR = range(5)  # a frame's kind
HEADER = struct.Struct("!BI")  # kind, length of the payload
MAX_FRAME = 64 << 20  # bytes: a larger length is a broken stream, not a frame
CHUNK = 65536
BACKLOG = 64
SPAWN_FAILED = 127  # the exit code of a command that could not be started (as a shell says it)
GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/busybox"  # the host's programs, then busybox
BASE_ENV = {"PATH": GUEST_PATH, "HOME": "/root", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}


def frame(kind: int, payload: bytes) -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def read_frame(stream: Any) -> tuple[int, bytes] | None:
    """The next frame from ``stream`` (a file opened on the socket), or None at its end."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    kind, length = HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ValueError(f"a frame of {length} bytes: not this protocol")
    payload = stream.read(length)
    if len(payload) < length:
        return None
    return kind, payload


def request(token: str, argv: list[str], env: dict[str, str] | None = None, stdin: bytes = b"") -> bytes:
    """The REQUEST frame that runs ``argv`` with ``env`` (over BASE_ENV) and ``stdin``."""
    body = {"token": token, "argv": argv, "env": env or {}, "stdin": base64.b64encode(stdin).decode()}
    return frame(REQUEST, json.dumps(body).encode())


def exit_code(returncode: int) -> int:
    """A process' exit as a shell reports it: its code, or 128 + the signal that ended it."""
    return 128 - returncode if returncode < 0 else returncode


# -- the server, in the guest ------------------------------------------------------------------------


class _Connection:
    """One client's command: its output framed back under a lock (two pumps write), killed if the client goes."""

    def __init__(self, conn: socket.socket, token: str) -> None:
        self.conn, self.token = conn, token
        self.lock = threading.Lock()
        self.finished = threading.Event()

    def send(self, kind: int, payload: bytes) -> None:
        with self.lock:
            self.conn.sendall(frame(kind, payload))

    def serve(self) -> None:
        try:
            with self.conn, self.conn.makefile("rb") as stream:
                first = read_frame(stream)
                if first is None or first[0] != REQUEST:
                    return
                body = json.loads(first[1])
                if body.get("token") != self.token:
                    self.send(ERROR, b"wrong token")
                    return
                self.send(EXIT, str(self._run(body, stream)).encode())
        except OSError:
            pass  # the client went: its command was killed by the watcher

    def _run(self, body: dict[str, Any], stream: Any) -> int:
        try:
            process = subprocess.Popen(
                body["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env={**BASE_ENV, **body["env"]}, start_new_session=True,
            )  # fmt: skip
        except OSError as error:
            self.send(STDERR, f"{body['argv'][0]}: {error}\n".encode())
            return SPAWN_FAILED
        threading.Thread(target=self._watch, args=(stream, process), daemon=True).start()
        pumps = [threading.Thread(target=self._pump, args=(pipe, kind), daemon=True)
                 for pipe, kind in ((process.stdout, STDOUT), (process.stderr, STDERR))]  # fmt: skip
        for pump in pumps:
            pump.start()
        assert process.stdin is not None
        try:
            process.stdin.write(base64.b64decode(body["stdin"]))
            process.stdin.close()
        except OSError:
            pass  # it did not read its stdin
        code = process.wait()
        self.finished.set()
        for pump in pumps:
            pump.join()
        return exit_code(code)

    def _pump(self, pipe: Any, kind: int) -> None:
        while chunk := pipe.read1(CHUNK):
            try:
                self.send(kind, chunk)
            except OSError:
                return

    def _watch(self, stream: Any, process: subprocess.Popen[bytes]) -> None:
        """Until the client hangs up: then the command's group is killed, as its terminal's would be."""
        with contextlib.suppress(OSError):
            stream.read(1)
        if not self.finished.is_set():
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)


def _relay(listen: tuple[str, int], target: tuple[str, int]) -> None:
    """Every connection to ``listen`` joined to a new one to ``target``, both ways."""
    server = socket.create_server(listen, backlog=BACKLOG)
    while True:
        client, _ = server.accept()
        threading.Thread(target=_join, args=(client, target), daemon=True).start()


def _join(client: socket.socket, target: tuple[str, int]) -> None:
    try:
        upstream = socket.create_connection(target)
    except OSError:
        client.close()
        return
    for source, sink in ((client, upstream), (upstream, client)):
        threading.Thread(target=_copy, args=(source, sink), daemon=True).start()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(CHUNK):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        source.close()
        sink.close()


def serve(config: dict[str, Any]) -> None:
    """The relays of ``config``, then commands on its ``listen`` address for clients with its ``token``."""
    for relay in config.get("relays", []):
        listen, target = (tuple(relay[key]) for key in ("listen", "target"))
        threading.Thread(target=_relay, args=(listen, target), daemon=True).start()
    server = socket.create_server(tuple(config["listen"]), backlog=BACKLOG)
    print("krv-guest: serving", flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_Connection(conn, config["token"]).serve, daemon=True).start()


if __name__ == "__main__":
    with open(sys.argv[1]) as file:
        serve(json.load(file))
