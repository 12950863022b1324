"""What kuberaven-cni and the node agent say to each other over the agent's unix socket (cni/, pure, stdlib only).

    runtime ──CNI_* + config on stdin──► kuberaven-cni (plugin.py) ──request──► kuberaven node (node/server.py)
    runtime ◄──stdout + exit code────── kuberaven-cni ◄──────────answer───────┘

One request and one answer per connection, each a JSON object sent whole,
the end of the request marked by the client shutting its writing half:

    request: {"environ": {"CNI_COMMAND": "ADD", …only CNI_* variables}, "config": "<the config text, as given>"}
    answer:  {"code": <the exit code>, "stdout": "<what the plugin prints>"}

The plugin imports this module and the standard library only, so that it
starts in a few tens of milliseconds; the versions and the error format it
answers by itself (VERSION, no agent) are defined here for both sides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

SUPPORTED_VERSIONS = ("1.0.0", "1.1.0")  # the CNI specification's versions spoken
LATEST_VERSION = SUPPORTED_VERSIONS[-1]
DEFAULT_SOCKET = "/run/kuberaven/cni.sock"  # where `kuberaven node` listens; the config's "socket" overrides it
MAX_MESSAGE = 1 << 20  # bytes: a request or an answer larger than this is refused
ENVIRON_PREFIX = "CNI_"  # the only variables a request carries
# The specification's codes the plugin itself may answer with (the agent's are in spec.py's ErrorCode).
TRY_AGAIN_LATER = 11
NOT_AVAILABLE = 50  # STATUS: the plugin cannot serve ADD
STATUS, VERSION = "STATUS", "VERSION"


class ProtocolError(ValueError):
    """A request or an answer that is not what this module writes; the message says what is wrong."""


def encode_request(environ: Mapping[str, str], config: str) -> bytes:
    """The CNI_* variables of ``environ`` and the config text, as the agent reads them."""
    carried = {key: value for key, value in environ.items() if key.startswith(ENVIRON_PREFIX)}
    return json.dumps({"environ": carried, "config": config}).encode()


def decode_request(data: bytes) -> tuple[dict[str, str], str]:
    """(the CNI_* environment, the config text) of a request; ProtocolError if it is not one."""
    message = _decode(data, "request")
    environ, config = message.get("environ"), message.get("config")
    if not isinstance(environ, dict) or not all(isinstance(v, str) for v in environ.values()):
        raise ProtocolError("request: environ is not an object of strings")
    if not isinstance(config, str):
        raise ProtocolError("request: config is not a string")
    return {k: v for k, v in environ.items() if k.startswith(ENVIRON_PREFIX)}, config


def encode_answer(code: int, stdout: str) -> bytes:
    return json.dumps({"code": code, "stdout": stdout}).encode()


def decode_answer(data: bytes) -> tuple[int, str]:
    """(exit code, stdout) of an answer; ProtocolError if it is not one (an agent that died mid-call sends none)."""
    message = _decode(data, "answer")
    code, stdout = message.get("code"), message.get("stdout")
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(stdout, str):
        raise ProtocolError("answer: code is not an integer or stdout not a string")
    return code, stdout


def _decode(data: bytes, what: str) -> dict[str, object]:
    if not data:
        raise ProtocolError(f"{what}: empty (the other side closed the connection)")
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"{what}: larger than {MAX_MESSAGE} bytes")
    try:
        message = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ProtocolError(f"{what}: not JSON: {error}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"{what}: not a JSON object")
    return message


def config_version(config: str) -> str:
    """The config's cniVersion when it is one we speak, else the latest: what an answer's cniVersion says."""
    try:
        found = json.loads(config).get("cniVersion")
    except (json.JSONDecodeError, AttributeError):
        return LATEST_VERSION
    return found if found in SUPPORTED_VERSIONS else LATEST_VERSION


def config_socket(config: str) -> str:
    """The agent's socket named by the config's ``socket`` key, else DEFAULT_SOCKET."""
    try:
        found = json.loads(config).get("socket")
    except (json.JSONDecodeError, AttributeError):
        return DEFAULT_SOCKET
    return found if isinstance(found, str) and found else DEFAULT_SOCKET


def error_json(version: str, code: int, msg: str, details: str = "") -> str:
    """The specification's error object, as printed on stdout."""
    return json.dumps({"cniVersion": version, "code": code, "msg": msg, "details": details})


def version_json(config: str) -> str:
    """VERSION's answer: the versions spoken, in the config's version (or the latest)."""
    return json.dumps({"cniVersion": config_version(config), "supportedVersions": list(SUPPORTED_VERSIONS)})


def no_agent(command: str, socket_path: str, config: str, reason: str) -> tuple[int, str]:
    """(exit code 1, error JSON) when the agent cannot be reached: STATUS says not available (50), the others
    try again later (11): the runtime retries them once the agent is back."""
    code = NOT_AVAILABLE if command == STATUS else TRY_AGAIN_LATER
    msg = f"no kuberaven node agent answers at {socket_path} ({reason})"
    details = "start `kuberaven node` on this node (the kuberaven-cni DaemonSet, deploy/kuberaven-cni.yaml)"
    return 1, error_json(config_version(config), code, msg, details)
