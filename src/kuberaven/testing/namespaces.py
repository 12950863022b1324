"""Namespaces ready for pods (testing/): created, with the default service account's token."""

from __future__ import annotations

import asyncio

from ..kube.client import KubeClient
from ..kube.errors import NotFound


async def create_namespace(client: KubeClient, name: str, timeout: float = 20.0) -> None:
    """Create ``name`` and wait until pods can be created in it.

    The ServiceAccount admission plugin refuses pods until the token
    controller has given "default" its token secret.
    """
    await client.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        try:
            account = await client.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
            if account.get("secrets"):
                return
        except NotFound:
            pass
        await asyncio.sleep(0.1)
    raise TimeoutError(f"namespace {name}: default service account has no token after {timeout:.0f}s")
