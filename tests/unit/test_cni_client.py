"""kuberaven-cni, the thin client (cni/plugin.py, cni/protocol.py): the framing, what it answers by itself, what
it prints of the agent's answer, and that it loads nothing but the standard library."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuberaven.cni.protocol import (
    MAX_MESSAGE,
    ProtocolError,
    config_socket,
    config_version,
    decode_answer,
    decode_request,
    encode_answer,
    encode_request,
    no_agent,
    version_json,
)

SRC = str(Path(__file__).parents[2] / "src")
CONFIG = json.dumps({"cniVersion": "1.0.0", "name": "kuberaven", "type": "kuberaven-cni", "socket": "/x/cni.sock"})


def test_a_request_carries_the_cni_variables_and_the_config_as_given() -> None:
    environ = {"CNI_COMMAND": "ADD", "CNI_ARGS": "K8S_POD_NAME=a", "PATH": "/bin", "HOME": "/root"}
    assert decode_request(encode_request(environ, CONFIG)) == (
        {"CNI_COMMAND": "ADD", "CNI_ARGS": "K8S_POD_NAME=a"},
        CONFIG,
    )
    assert decode_answer(encode_answer(11, '{"code": 11}')) == (11, '{"code": 11}')


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "empty (the other side closed the connection)"),
        (b"{", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"environ": {"CNI_COMMAND": 1}, "config": ""}', "environ is not an object of strings"),
        (b'{"environ": {}, "config": null}', "config is not a string"),
        (b" " * (MAX_MESSAGE + 1), "larger than"),
    ],
)
def test_a_request_that_is_not_one_is_refused(data: bytes, problem: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(problem)):
        decode_request(data)


@pytest.mark.parametrize("data", [b"", b'{"code": "0", "stdout": ""}', b'{"code": true, "stdout": ""}', b'{"code": 0}'])
def test_an_answer_that_is_not_one_is_refused(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_answer(data)


def test_versions_and_the_socket_come_from_the_config() -> None:
    assert (config_version(CONFIG), config_socket(CONFIG)) == ("1.0.0", "/x/cni.sock")
    # Unreadable or unknown: the latest version, the default socket.
    for config in ("", "{", "[]", '{"cniVersion": "0.3.1", "socket": 4}'):
        assert (config_version(config), config_socket(config)) == ("1.1.0", "/run/kuberaven/cni.sock")
    assert json.loads(version_json(CONFIG)) == {"cniVersion": "1.0.0", "supportedVersions": ["1.0.0", "1.1.0"]}


def test_without_an_agent_status_is_not_available_and_the_rest_try_again_later() -> None:
    for command, expected in (("STATUS", 50), ("ADD", 11), ("DEL", 11), ("CHECK", 11), ("GC", 11)):
        code, stdout = no_agent(command, "/x/cni.sock", CONFIG, "No such file or directory")
        error = json.loads(stdout)
        assert (code, error["code"], error["cniVersion"]) == (1, expected, "1.0.0")
        assert "/x/cni.sock" in error["msg"] and "No such file" in error["msg"]
        assert "kuberaven node" in error["details"]


def plugin(environ: dict[str, str], stdin: str) -> subprocess.CompletedProcess[str]:
    """`python -m kuberaven.cni.plugin`, as the runtime runs kuberaven-cni."""
    return subprocess.run(
        [sys.executable, "-m", "kuberaven.cni.plugin"],
        input=stdin,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": SRC, **environ},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def canned_agent(tmp_path: Path) -> Iterator[tuple[str, list[bytes]]]:
    """A unix socket that answers every call with exit code 7 and a fixed stdout, keeping the requests."""
    path, requests = str(tmp_path / "cni.sock"), []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                received = b""
                while chunk := connection.recv(4096):
                    received += chunk
                requests.append(received)
                connection.sendall(encode_answer(7, '{"said": "the agent"}'))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, requests
    server.close()
    thread.join(5)


def test_the_plugin_prints_the_agents_answer_with_its_exit_code(canned_agent: tuple[str, list[bytes]]) -> None:
    path, requests = canned_agent
    config = json.dumps({**json.loads(CONFIG), "socket": path})
    done = plugin({"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c", "HOME": "/root"}, config)
    assert (done.returncode, done.stdout, done.stderr) == (7, '{"said": "the agent"}\n', "")
    assert decode_request(requests[0]) == ({"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c"}, config)


def test_the_plugin_answers_version_itself_and_names_the_socket_when_no_agent_answers(tmp_path: Path) -> None:
    done = plugin({"CNI_COMMAND": "VERSION"}, "{}")
    assert (done.returncode, json.loads(done.stdout)["supportedVersions"]) == (0, ["1.0.0", "1.1.0"])
    missing = str(tmp_path / "none.sock")
    done = plugin({"CNI_COMMAND": "STATUS"}, json.dumps({**json.loads(CONFIG), "socket": missing}))
    error = json.loads(done.stdout)
    assert done.returncode == 1 and error["code"] == 50 and missing in error["msg"], error


def test_the_plugin_loads_the_standard_library_and_its_own_two_modules_only() -> None:
    code = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import kuberaven.cni.plugin\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    ours = {m for m in loaded if m.split(".")[0] == "kuberaven"}
    others = {m.split(".")[0] for m in loaded} - {"kuberaven"} - set(sys.stdlib_module_names)
    assert others == set(), others
    # The package's own import (plugins.py, which sets model/'s loader) and the client: no network/, no kube/.
    assert ours <= {
        "kuberaven",
        "kuberaven.plugins",
        "kuberaven.model",
        "kuberaven.model.registry",
        "kuberaven.cni",
        "kuberaven.cni.plugin",
        "kuberaven.cni.protocol",
    }, ours
