"""Run a command in a nested node's VM from the host (testing/): the client of vm_guest.py's command server.

    python -m kuberaven.testing.vm_exec <VM dir> [-i] [-e NAME=VALUE]... -- <command> [args...]

What `testenv up` writes as each VM's ``exec`` (env.json's openstack.nested). With ``-i`` its stdin is read
whole and given to the command (else the command's stdin is empty); the command's stdout and stderr come out
as they are written; it exits with the command's code.
Killed (SIGTERM, SIGKILL), it hangs up, and the command's whole process group in the guest is SIGKILLed: a node
agent run through it lives exactly as long as this process. ``<VM dir>/control.json`` says where the VM's server
listens (a port of the host's loopback that QEMU forwards) and its token.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from .vm_guest import ERROR, EXIT, STDERR, STDOUT, read_frame, request

CONTROL_FILE = "control.json"
CONNECT_WITHIN = 10.0  # seconds to connect to QEMU's forwarded port (it is local)


@dataclass(frozen=True)
class Control:
    """Where a VM's command server is reached from the host, and its token."""

    host: str
    port: int
    token: str

    @classmethod
    def load(cls, vm_dir: Path) -> Control:
        return cls(**json.loads((Path(vm_dir) / CONTROL_FILE).read_text()))


class GuestUnreachable(ConnectionError):
    """The VM's command server did not answer (not booted yet, or gone)."""


def run(
    control: Control,
    argv: list[str],
    env: dict[str, str] | None = None,
    stdin: bytes = b"",
    timeout: float | None = None,
    out: object = None,
) -> tuple[int, bytes, bytes]:
    """``argv`` run in the guest: (exit code, stdout, stderr). ``out``: a pair of binary files that get the
    output as it comes instead (then the bytes returned are empty). GuestUnreachable if no command server
    answered; TimeoutError after ``timeout`` seconds without a frame."""
    try:
        conn = socket.create_connection((control.host, control.port), timeout=CONNECT_WITHIN)
    except OSError as error:
        raise GuestUnreachable(f"{control.host}:{control.port}: {error}") from None
    with conn, conn.makefile("rb") as stream:
        conn.settimeout(timeout)
        conn.sendall(request(control.token, argv, env, stdin))
        chunks: dict[int, list[bytes]] = {STDOUT: [], STDERR: []}
        while True:
            try:
                got = read_frame(stream)
            except TimeoutError:
                raise TimeoutError(f"{argv[0]}: no answer from the guest within {timeout}s") from None
            except OSError as error:
                raise GuestUnreachable(f"{control.host}:{control.port}: {error}") from None
            if got is None:
                raise GuestUnreachable(f"{control.host}:{control.port}: the guest hung up (no command server yet)")
            kind, payload = got
            if kind == EXIT:
                return int(payload), b"".join(chunks[STDOUT]), b"".join(chunks[STDERR])
            if kind == ERROR:
                raise GuestUnreachable(payload.decode(errors="replace"))
            if out is not None:
                sink = out[0] if kind == STDOUT else out[1]  # type: ignore[index]
                sink.write(payload)
                sink.flush()
            else:
                chunks[kind].append(payload)


def main(arguments: list[str]) -> int:
    parser = argparse.ArgumentParser(description="run a command in a nested node's VM")
    parser.add_argument("vm_dir", type=Path)
    parser.add_argument("-e", "--env", action="append", default=[], help="NAME=VALUE for the command")
    parser.add_argument("-i", "--stdin", action="store_true", help="give this stdin, read whole, to the command")
    # The command is what follows the first "--": argparse's REMAINDER would take the options after the directory.
    split = arguments.index("--") if "--" in arguments else len(arguments)
    options, command = parser.parse_args(arguments[:split]), arguments[split + 1 :]
    if not command:
        parser.error("no command")
    env = dict(pair.split("=", 1) for pair in options.env)
    stdin = sys.stdin.buffer.read() if options.stdin else b""
    try:
        code, _, _ = run(Control.load(options.vm_dir), command, env, stdin, out=(sys.stdout.buffer, sys.stderr.buffer))
    except GuestUnreachable as error:
        print(f"vm_exec: {error}", file=sys.stderr)
        return 255
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
