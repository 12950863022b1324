"""The ``kuberaven-cni`` executable (cni/): a thin client that hands each CNI call to the node agent.

    runtime ──CNI_* + config on stdin──► main() ── VERSION: answered here
                                               └─ ADD / DEL / CHECK / STATUS / GC ──protocol.py──►
                                                  unix socket (the config's "socket") ──► kuberaven node (node/)
    runtime ◄──the agent's stdout and exit code──┘   no agent: the spec's error naming the socket (11; STATUS 50)

The runtime starts one process per call, so this module imports the
standard library and protocol.py only (tests/unit/test_cni_client.py checks
it): its start-up is the interpreter's. The work and the waiting (the pod's
VIF, the port's readiness) are the agent's.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping

from .protocol import (
    MAX_MESSAGE,
    VERSION,
    ProtocolError,
    config_socket,
    decode_answer,
    encode_request,
    no_agent,
    version_json,
)

CHUNK = 65536  # bytes read at once from the socket


def call_agent(socket_path: str, environ: Mapping[str, str], config: str) -> tuple[int, str]:
    """Send one call to the agent at ``socket_path``: (exit code, stdout). OSError when no agent listens;
    ProtocolError when it answered nothing usable (it died mid-call)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(socket_path)
        connection.sendall(encode_request(environ, config))
        connection.shutdown(socket.SHUT_WR)
        received = bytearray()
        while chunk := connection.recv(CHUNK):
            received += chunk
            if len(received) > MAX_MESSAGE:
                break
    return decode_answer(bytes(received))


def answer(environ: Mapping[str, str], config: str) -> tuple[int, str]:
    """(exit code, stdout) of one invocation."""
    command = environ.get("CNI_COMMAND", "")
    if command == VERSION:
        return 0, version_json(config)
    socket_path = config_socket(config)
    try:
        return call_agent(socket_path, environ, config)
    except OSError as error:
        return no_agent(command, socket_path, config, error.strerror or str(error))
    except ProtocolError as error:
        return no_agent(command, socket_path, config, str(error))


def main() -> None:
    """Entry point of ``kuberaven-cni``: print the answer, exit with its code."""
    reads_stdin = os.environ.get("CNI_COMMAND") != VERSION or not sys.stdin.isatty()
    code, stdout = answer(os.environ, sys.stdin.read() if reads_stdin else "")
    if stdout:
        sys.stdout.write(stdout if stdout.endswith("\n") else stdout + "\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
