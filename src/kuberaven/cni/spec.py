"""The CNI specification 1.0.0 as kuberaven-cni needs it (cni/, pure: no I/O).

    CNI_* environment + config JSON ──► Invocation   (or CniError with the spec's code)
    Vif + names                      ──► the ADD result JSON
    CniError                         ──► the error JSON printed on stdout

Interface names follow from what the runtime passes, so that DEL and a
repeated ADD find what an earlier ADD made without any stored state.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ..network.vif import Vif

CNI_VERSION = "1.0.0"
SUPPORTED_VERSIONS = (CNI_VERSION,)
DEFAULT_ANNOTATION_TIMEOUT = 30.0  # seconds ADD waits for the translator's VIF annotation
DEFAULT_ACTIVE_TIMEOUT = 60.0  # seconds ADD waits, once it has plugged an OVS port, for the port to be ACTIVE
DEFAULT_OVS_BRIDGE = "br-int"  # where OVN's ovn-controller (or Neutron's OVS agent) binds ports
IFNAME_MAX = 15  # Linux's bound on an interface name
HOST_PREFIX, BRIDGE_PREFIX = "krv", "krvbr"  # + a hash: found again by name, within IFNAME_MAX


class Command:
    ADD, DEL, CHECK, VERSION = "ADD", "DEL", "CHECK", "VERSION"


class Code(IntEnum):
    """The specification's well-known error codes (1-99), then ours (100 and up)."""

    INCOMPATIBLE_VERSION = 1
    UNSUPPORTED_FIELD = 2
    UNKNOWN_CONTAINER = 3
    INVALID_ENVIRONMENT = 4
    IO_FAILURE = 5
    DECODE_FAILURE = 6
    INVALID_CONFIG = 7
    TRY_AGAIN_LATER = 11
    NOT_AS_WIRED = 100  # CHECK: the pod's interface is not as its VIF says


class CniError(Exception):
    def __init__(self, code: Code, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code, self.msg, self.details = code, msg, details

    def to_json(self) -> str:
        return json.dumps({"cniVersion": CNI_VERSION, "code": int(self.code), "msg": self.msg, "details": self.details})


@dataclass(frozen=True)
class Invocation:
    command: str
    container_id: str
    netns: str | None
    ifname: str
    pod_namespace: str | None
    pod_name: str | None
    pod_uid: str | None
    kubeconfig: str | None
    timeout: float
    network_name: str
    active_timeout: float = DEFAULT_ACTIVE_TIMEOUT
    ovsdb: str | None = None  # the node's Open_vSwitch database (ovs-vsctl --db); None: ovs-vsctl's default
    ovs_bridge: str = DEFAULT_OVS_BRIDGE
    node_netns: str | None = None  # the netns of the node's OVS and of pods' host ends; None: the plugin's own


REQUIRED = {
    Command.ADD: ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"),
    Command.CHECK: ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"),
    Command.DEL: ("CNI_CONTAINERID", "CNI_IFNAME"),
}


def parse_args(text: str) -> dict[str, str]:
    """CNI_ARGS: ``K=V;K=V`` (the runtime's K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID …)."""
    pairs = (item.split("=", 1) for item in text.split(";") if item)
    try:
        return {key: value for key, value in pairs}
    except ValueError:
        raise CniError(Code.INVALID_ENVIRONMENT, f"CNI_ARGS is not K=V;K=V: {text!r}") from None


def parse_config(text: str) -> dict[str, Any]:
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise CniError(Code.DECODE_FAILURE, f"network configuration is not JSON: {error}") from None
    if not isinstance(config, dict):
        raise CniError(Code.DECODE_FAILURE, "network configuration is not a JSON object")
    version = config.get("cniVersion")
    if version not in SUPPORTED_VERSIONS:
        raise CniError(Code.INCOMPATIBLE_VERSION, f"cniVersion {version!r} is not supported (supported: 1.0.0)")
    for key, default in (("annotationTimeout", DEFAULT_ANNOTATION_TIMEOUT), ("activeTimeout", DEFAULT_ACTIVE_TIMEOUT)):
        timeout = config.get(key, default)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise CniError(Code.INVALID_CONFIG, f"{key} must be a positive number of seconds, not {timeout!r}")
    if not isinstance(config.get("name"), str) or not config["name"]:
        raise CniError(Code.INVALID_CONFIG, "network configuration has no name")
    for key in ("ovsdb", "ovsBridge", "nodeNetns", "kubeconfig"):
        if key in config and (not isinstance(config[key], str) or not config[key]):
            raise CniError(Code.INVALID_CONFIG, f"{key} must be a non-empty string, not {config[key]!r}")
    return config


def invocation(environ: dict[str, str], config: dict[str, Any]) -> Invocation:
    """What the runtime asks (ADD, DEL, CHECK), from its environment and the parsed configuration."""
    command = environ.get("CNI_COMMAND", "")
    if command not in REQUIRED:
        raise CniError(Code.INVALID_ENVIRONMENT, f"CNI_COMMAND {command!r} is not ADD, DEL, CHECK or VERSION")
    missing = [name for name in REQUIRED[command] if not environ.get(name)]
    if missing:
        raise CniError(Code.INVALID_ENVIRONMENT, f"{command} needs {', '.join(missing)}")
    args = parse_args(environ.get("CNI_ARGS", ""))
    if command != Command.DEL and not (args.get("K8S_POD_NAMESPACE") and args.get("K8S_POD_NAME")):
        raise CniError(Code.INVALID_ENVIRONMENT, "CNI_ARGS lacks K8S_POD_NAMESPACE and K8S_POD_NAME")
    ifname = environ["CNI_IFNAME"]
    if len(ifname) > IFNAME_MAX or "/" in ifname:
        raise CniError(Code.INVALID_ENVIRONMENT, f"CNI_IFNAME {ifname!r} is not a valid interface name")
    return Invocation(
        command=command,
        container_id=environ["CNI_CONTAINERID"],
        netns=environ.get("CNI_NETNS") or None,
        ifname=ifname,
        pod_namespace=args.get("K8S_POD_NAMESPACE"),
        pod_name=args.get("K8S_POD_NAME"),
        pod_uid=args.get("K8S_POD_UID"),
        kubeconfig=config.get("kubeconfig"),
        timeout=float(config.get("annotationTimeout", DEFAULT_ANNOTATION_TIMEOUT)),
        network_name=config["name"],
        active_timeout=float(config.get("activeTimeout", DEFAULT_ACTIVE_TIMEOUT)),
        ovsdb=config.get("ovsdb"),
        ovs_bridge=config.get("ovsBridge", DEFAULT_OVS_BRIDGE),
        node_netns=config.get("nodeNetns"),
    )


def _short(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def host_ifname(container_id: str, ifname: str) -> str:
    """The host end of a pod's veth: one per (container, interface), found again by DEL."""
    return f"{HOST_PREFIX}{_short(container_id, ifname)[:11]}"


def bridge_name(network: str) -> str:
    """The node's bridge of one translated network (pods of other networks are on other bridges)."""
    return f"{BRIDGE_PREFIX}{_short(network)[:10]}"


def result(vif: Vif, invocation: Invocation, host: str, host_mac: str) -> dict[str, Any]:
    """The ADD (and cached) result: the two interfaces, the pod's address, its default route."""
    return {
        "cniVersion": CNI_VERSION,
        "interfaces": [
            {"name": host, "mac": host_mac},
            {"name": invocation.ifname, "mac": vif.mac, "sandbox": invocation.netns},
        ],
        "ips": [{"address": f"{vif.ip}/{vif.prefix_length}", "gateway": vif.gateway, "interface": 1}],
        "routes": [{"dst": "0.0.0.0/0", "gw": vif.gateway}],
        "dns": {},
    }


def version() -> dict[str, Any]:
    return {"cniVersion": CNI_VERSION, "supportedVersions": list(SUPPORTED_VERSIONS)}
