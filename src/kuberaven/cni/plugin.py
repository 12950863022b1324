"""The ``kuberaven-cni`` executable (cni/): one CNI invocation from the runtime, start to finish.

    stdin (network config) + CNI_* ──► spec.py: Invocation ──► ADD / DEL / CHECK / VERSION
        ADD, CHECK: the pod's VIF annotation through the API (waiting up to annotationTimeout)
                    ──► links.py ──► (ADD of an OVS port: until the VIF says the port is ACTIVE, up to
                    activeTimeout, as Kuryr's CNI waited for its VIF to be active)
                    ──► result JSON on stdout, exit 0
        any failure ──► the spec's error JSON on stdout, exit 1

The annotation is read with the kubeconfig named in the network config
(the DaemonSet in deploy/ writes one for its service account).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ..kube.client import KubeClient
from ..kube.errors import ApiError, NotFound
from ..network.vif import VIF_ANNOTATION, Vif, VifError
from . import links
from .spec import CniError, Code, Command, Invocation, invocation, parse_config, result, version

POLL = 0.2  # seconds between two reads of a pod still without its annotation


def _vif_of(pod: dict[str, Any] | None, call: Invocation) -> Vif | str:
    """The pod's VIF, or why there is none yet."""
    if pod is None:
        return "the pod does not exist"
    uid = pod["metadata"]["uid"]
    if call.pod_uid not in (None, uid):
        return f"the pod is another one (uid {uid}, not {call.pod_uid})"
    text = (pod["metadata"].get("annotations") or {}).get(VIF_ANNOTATION)
    if text is None:
        return f"the pod has no {VIF_ANNOTATION} annotation"
    try:
        return Vif.from_json(text)
    except VifError as error:
        raise CniError(Code.DECODE_FAILURE, str(error)) from None


async def _read_vif(call: Invocation, port: str | None = None) -> Vif:
    """The pod's VIF, waiting for the translator to write it; TRY_AGAIN_LATER once the bound has passed.

    With ``port`` (after plugging it), until that port's VIF says ACTIVE, for at most activeTimeout."""
    try:
        client = KubeClient.from_kubeconfig(call.kubeconfig)
    except Exception as error:
        raise CniError(Code.INVALID_CONFIG, f"cannot load kubeconfig {call.kubeconfig!r}: {error}") from None
    pod_name = f"{call.pod_namespace}/{call.pod_name}"
    deadline = time.monotonic() + (call.timeout if port is None else call.active_timeout)
    try:
        while True:
            try:
                pod = await client.request("GET", f"/api/v1/namespaces/{call.pod_namespace}/pods/{call.pod_name}")
            except NotFound:
                pod = None
            except ApiError as error:
                raise CniError(Code.IO_FAILURE, f"reading pod {pod_name}: {error}") from None
            found = _vif_of(pod, call)
            if isinstance(found, Vif) and (port is None or (found.port == port and found.active)):
                return found
            if time.monotonic() >= deadline:
                raise _gave_up(call, pod_name, found, port)
            await asyncio.sleep(POLL)
    finally:
        await client.close()


def _gave_up(call: Invocation, pod_name: str, found: Vif | str, port: str | None) -> CniError:
    if port is None:
        return CniError(
            Code.TRY_AGAIN_LATER,
            f"pod {pod_name}: no VIF after {call.timeout:g} s ({found})",
            "kuberaven's network translator writes it once the pod is scheduled (network_cni=kuberaven)",
        )
    if isinstance(found, Vif) and found.port == port:
        status = found.status
    else:
        status = f"unknown ({found if isinstance(found, str) else f'the VIF names port {found.port} now'})"
    return CniError(
        Code.TRY_AGAIN_LATER,
        f"pod {pod_name}: port {port} is {status}, not ACTIVE, after {call.active_timeout:g} s",
        f"plugged into {call.ovs_bridge}; the node's OVN (or OVS agent) binds it and Neutron reports it ACTIVE, "
        "which kuberaven writes into the pod's VIF",
    )


def _run(environ: dict[str, str], stdin: str) -> dict[str, Any] | None:
    if environ.get("CNI_COMMAND") == Command.VERSION:
        return version()
    config = parse_config(stdin)
    call = invocation(environ, config)
    if call.command == Command.DEL:
        links.unwire(call)
        return None
    assert call.netns is not None  # required for ADD and CHECK
    if not Path(call.netns).exists():
        raise CniError(Code.UNKNOWN_CONTAINER, f"network namespace {call.netns} does not exist")
    vif = asyncio.run(_read_vif(call))
    if call.command == Command.CHECK:
        links.check(vif, call)
        return None
    host, host_mac = links.wire(vif, call)
    if not vif.active:
        vif = asyncio.run(_read_vif(call, port=vif.port))
    return result(vif, call, host, host_mac)


def main() -> None:
    """Entry point of ``kuberaven-cni``: exit 0 with the result (if any) on stdout, else 1 with the error."""
    try:
        answer = _run(dict(os.environ), sys.stdin.read() if os.environ.get("CNI_COMMAND") != Command.VERSION else "")
    except CniError as error:
        print(error.to_json())
        sys.exit(1)
    except Exception as error:  # anything unforeseen still answers in the spec's format
        print(CniError(Code.IO_FAILURE, f"{type(error).__name__}: {error}").to_json())
        sys.exit(1)
    if answer is not None:
        print(json.dumps(answer))


if __name__ == "__main__":
    main()
