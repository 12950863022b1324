"""The CNI specification 1.0.0 and 1.1.0 as the node agent applies it (cni/, pure: no I/O).

    CNI_* environment + config JSON ──► Invocation   (or CniError with the spec's code)
    Vif + names                      ──► the ADD result JSON, in the config's cniVersion
    CniError                         ──► the error JSON printed on stdout
    GC's valid attachments + the node's krv… interfaces ──► stale(): the ones to remove
    parked pairs' times                                   ──► expired(): the ones the agent unwires

Interface names follow from what the runtime passes, so that DEL, GC and a
repeated ADD find what an earlier ADD made without any stored state: the
agent (node/) keeps none, and a restarted agent finds every pod it wired.
A pair handed to the next pod of its port keeps its host end's name; the
node's Open vSwitch holds whose it is now (ATTACHMENT_KEY).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ..network.vif import Vif
from .protocol import LATEST_VERSION, SUPPORTED_VERSIONS

# Seconds a kubelet lets a sandbox's start run, the CNI ADD inside it: twice its runtimeRequestTimeout (2 min by
# default; k8s.io/cri-client's RunPodSandbox), the deadline of the call's context, which containerd hands to the
# plugin's process (killed when it passes).
KUBELET_SANDBOX_TIMEOUT = 240.0
DEFAULT_ACTIVE_TIMEOUT = 60.0  # seconds ADD waits, once it has plugged an OVS port, for the port to be ready
WIRING_MARGIN = 10.0  # seconds left in a kubelet's deadline for the wiring itself (ip, ovs-vsctl) and the answer
# Seconds ADD waits for the translator's VIF annotation: a pod whose port is still being made (its pool empty, a
# burst) waits once, in one ADD, for as long as the kubelet's deadline leaves beside the readiness wait.
DEFAULT_ANNOTATION_TIMEOUT = KUBELET_SANDBOX_TIMEOUT - DEFAULT_ACTIVE_TIMEOUT - WIRING_MARGIN
IFNAME_MAX = 15  # Linux's bound on an interface name
HOST_PREFIX, BRIDGE_PREFIX = "krv", "krvbr"  # + a hash: found again by name, within IFNAME_MAX
PARKED_PREFIX = "krp"  # + a host end's hash: its pod end parked in the node's netns
HOST_HASH = 11  # hex digits of a host end's name after HOST_PREFIX
HOST_NAME = re.compile(rf"{HOST_PREFIX}[0-9a-f]{{{HOST_HASH}}}")  # a pod's host end (a bridge's name is not one)
# The OVS Interface's external_ids of a pod's host end: the attachment (container/ifname) it serves now, which a
# recycled port's pair handed to another pod changes; and since when its pod end is parked (Unix seconds).
ATTACHMENT_KEY, PARKED_AT_KEY = "kuberaven-attachment", "kuberaven-parked-at"
GROUPS_KEY = "kuberaven-security-groups"  # the port's security groups when its pair was plugged (groups_value)
# GC's list of the attachments the runtime knows; libcni sends it under both keys (the second an older spelling).
VALID_ATTACHMENTS = ("cni.dev/valid-attachments", "cni.dev/attachments")


class Command:
    ADD, DEL, CHECK, VERSION, STATUS, GC = "ADD", "DEL", "CHECK", "VERSION", "STATUS", "GC"


class ErrorCode(IntEnum):
    """The specification's well-known error codes (1-99), then ours (100 and up)."""

    INCOMPATIBLE_VERSION = 1
    UNSUPPORTED_FIELD = 2
    UNKNOWN_CONTAINER = 3
    INVALID_ENVIRONMENT = 4
    IO_FAILURE = 5
    DECODE_FAILURE = 6
    INVALID_CONFIG = 7
    TRY_AGAIN_LATER = 11
    NOT_AVAILABLE = 50  # STATUS: the plugin cannot serve ADD (the agent has not synced its pods)
    LIMITED_CONNECTIVITY = 51  # STATUS: not available, and existing pods may have limited connectivity (no OVS)
    NOT_AS_WIRED = 100  # CHECK: the pod's interface is not as its VIF says
    NO_PORT = 101  # ADD: the translator gives the pod no port until a user acts (a quota, a subnet's addresses)


class CniError(Exception):
    def __init__(self, code: ErrorCode, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code, self.msg, self.details = code, msg, details

    def to_json(self, version: str = LATEST_VERSION) -> str:
        """The error object in ``version`` (the config's cniVersion, when it is one we speak)."""
        return json.dumps({"cniVersion": version, "code": int(self.code), "msg": self.msg, "details": self.details})


@dataclass(frozen=True)
class Attachment:
    """One (container, interface) the runtime has attached: what GC keeps."""

    container_id: str
    ifname: str


@dataclass(frozen=True)
class Invocation:
    command: str
    version: str  # the config's cniVersion: the answer's
    container_id: str
    netns: str | None
    ifname: str
    pod_namespace: str | None
    pod_name: str | None
    pod_uid: str | None
    timeout: float
    network_name: str
    active_timeout: float = DEFAULT_ACTIVE_TIMEOUT
    ovs_bridge: str | None = None  # the config's ovsBridge; None: the agent's
    valid_attachments: tuple[Attachment, ...] = ()  # GC's

    @property
    def pod(self) -> str:
        return f"{self.pod_namespace}/{self.pod_name}"


REQUIRED = {
    Command.ADD: ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"),
    Command.CHECK: ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"),
    Command.DEL: ("CNI_CONTAINERID", "CNI_IFNAME"),
    Command.STATUS: (),
    Command.GC: (),
}
NEEDS_POD = (Command.ADD, Command.CHECK)


def parse_args(text: str) -> dict[str, str]:
    """CNI_ARGS: ``K=V;K=V`` (the runtime's K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID …)."""
    pairs = (item.split("=", 1) for item in text.split(";") if item)
    try:
        return {key: value for key, value in pairs}
    except ValueError:
        raise CniError(ErrorCode.INVALID_ENVIRONMENT, f"CNI_ARGS is not K=V;K=V: {text!r}") from None


def parse_config(text: str) -> dict[str, Any]:
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise CniError(ErrorCode.DECODE_FAILURE, f"network configuration is not JSON: {error}") from None
    if not isinstance(config, dict):
        raise CniError(ErrorCode.DECODE_FAILURE, "network configuration is not a JSON object")
    version = config.get("cniVersion")
    if version not in SUPPORTED_VERSIONS:
        spoken = ", ".join(SUPPORTED_VERSIONS)
        raise CniError(ErrorCode.INCOMPATIBLE_VERSION, f"cniVersion {version!r} is not supported (supported: {spoken})")
    for key, default in (("annotationTimeout", DEFAULT_ANNOTATION_TIMEOUT), ("activeTimeout", DEFAULT_ACTIVE_TIMEOUT)):
        timeout = config.get(key, default)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise CniError(ErrorCode.INVALID_CONFIG, f"{key} must be a positive number of seconds, not {timeout!r}")
    if not isinstance(config.get("name"), str) or not config["name"]:
        raise CniError(ErrorCode.INVALID_CONFIG, "network configuration has no name")
    for key in ("ovsBridge", "socket"):
        if key in config and (not isinstance(config[key], str) or not config[key]):
            raise CniError(ErrorCode.INVALID_CONFIG, f"{key} must be a non-empty string, not {config[key]!r}")
    return config


def valid_attachments(config: dict[str, Any]) -> tuple[Attachment, ...]:
    """GC's list of the attachments the runtime knows ({containerID, ifname} each)."""
    given: object = next((config[key] for key in VALID_ATTACHMENTS if key in config), [])
    if not isinstance(given, list):
        raise CniError(ErrorCode.INVALID_CONFIG, f"{VALID_ATTACHMENTS[0]} is not a list")
    found = []
    for item in given:
        if not (isinstance(item, dict) and isinstance(item.get("containerID"), str)):
            raise CniError(ErrorCode.INVALID_CONFIG, f"{VALID_ATTACHMENTS[0]}: {item!r} has no containerID")
        ifname = item.get("ifname")
        if not isinstance(ifname, str):
            raise CniError(ErrorCode.INVALID_CONFIG, f"{VALID_ATTACHMENTS[0]}: {item!r} has no ifname")
        found.append(Attachment(item["containerID"], ifname))
    return tuple(found)


def invocation(environ: dict[str, str], config: dict[str, Any]) -> Invocation:
    """What the runtime asks (ADD, DEL, CHECK, STATUS, GC), from its environment and the parsed configuration."""
    command = environ.get("CNI_COMMAND", "")
    if command not in REQUIRED:
        raise CniError(ErrorCode.INVALID_ENVIRONMENT, f"CNI_COMMAND {command!r} is not one of {', '.join(REQUIRED)}")
    missing = [name for name in REQUIRED[command] if not environ.get(name)]
    if missing:
        raise CniError(ErrorCode.INVALID_ENVIRONMENT, f"{command} needs {', '.join(missing)}")
    args = parse_args(environ.get("CNI_ARGS", ""))
    if command in NEEDS_POD and not (args.get("K8S_POD_NAMESPACE") and args.get("K8S_POD_NAME")):
        raise CniError(ErrorCode.INVALID_ENVIRONMENT, "CNI_ARGS lacks K8S_POD_NAMESPACE and K8S_POD_NAME")
    ifname = environ.get("CNI_IFNAME", "")
    if len(ifname) > IFNAME_MAX or "/" in ifname:
        raise CniError(ErrorCode.INVALID_ENVIRONMENT, f"CNI_IFNAME {ifname!r} is not a valid interface name")
    return Invocation(
        command=command,
        version=config["cniVersion"],
        container_id=environ.get("CNI_CONTAINERID", ""),
        netns=environ.get("CNI_NETNS") or None,
        ifname=ifname,
        pod_namespace=args.get("K8S_POD_NAMESPACE"),
        pod_name=args.get("K8S_POD_NAME"),
        pod_uid=args.get("K8S_POD_UID"),
        timeout=float(config.get("annotationTimeout", DEFAULT_ANNOTATION_TIMEOUT)),
        network_name=config["name"],
        active_timeout=float(config.get("activeTimeout", DEFAULT_ACTIVE_TIMEOUT)),
        ovs_bridge=config.get("ovsBridge"),
        valid_attachments=valid_attachments(config) if command == Command.GC else (),
    )


def _short(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def host_ifname(container_id: str, ifname: str) -> str:
    """The host end of a pod's veth: one per (container, interface), found again by DEL and GC."""
    return f"{HOST_PREFIX}{_short(container_id, ifname)[:HOST_HASH]}"


def parked_ifname(host: str) -> str:
    """The name of ``host``'s pod end while it is parked in the node's netns, between two pods of its port."""
    return f"{PARKED_PREFIX}{host.removeprefix(HOST_PREFIX)}"


def attachment_key(container_id: str, ifname: str) -> str:
    """The value of ATTACHMENT_KEY for one (container, interface)."""
    return f"{container_id}/{ifname}"


def groups_value(security_groups: Iterable[str]) -> str:
    """GROUPS_KEY's value: the groups sorted, comma-separated (OVN installs a port's flows for these)."""
    return ",".join(sorted(security_groups))


def bridge_name(network: str) -> str:
    """The node's bridge of one translated network (pods of other networks are on other bridges)."""
    return f"{BRIDGE_PREFIX}{_short(network)[:10]}"


def stale(
    names: Iterable[str], valid: Iterable[Attachment], busy: Iterable[str] = (), serving: Mapping[str, str] = {}
) -> list[str]:
    """GC's choice: of the node's interface and OVS port ``names``, the pods' host ends (krv + hash; not bridges,
    not anyone else's) that belong to no valid attachment and to no call in flight (``busy``), sorted. A host end
    handed to another pod keeps its name: ``serving`` (host end → ATTACHMENT_KEY's value) keeps it while that
    pod is valid."""
    valid_keys = {attachment_key(a.container_id, a.ifname) for a in valid}
    keep = {host_ifname(a.container_id, a.ifname) for a in valid} | set(busy)
    keep |= {name for name, key in serving.items() if key in valid_keys}
    return sorted({name for name in names if HOST_NAME.fullmatch(name) and name not in keep})


def expired(parked_at: Mapping[str, float], now: float, park_for: float) -> list[str]:
    """The host ends whose pod end has been parked (since ``parked_at``) for ``park_for`` seconds or more."""
    return sorted(name for name, since in parked_at.items() if now - since >= park_for)


def result(vif: Vif, invocation: Invocation, host: str, host_mac: str) -> dict[str, Any]:
    """The ADD result: the two interfaces, the pod's address, its default route, in the config's version."""
    return {
        "cniVersion": invocation.version,
        "interfaces": [
            {"name": host, "mac": host_mac},
            {"name": invocation.ifname, "mac": vif.mac, "sandbox": invocation.netns},
        ],
        "ips": [{"address": f"{vif.ip}/{vif.prefix_length}", "gateway": vif.gateway, "interface": 1}],
        "routes": [{"dst": "0.0.0.0/0", "gw": vif.gateway}],
        "dns": {},
    }
