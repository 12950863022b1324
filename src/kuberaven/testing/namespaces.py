"""Namespaces ready for pods (testing/): created, with the default service account's token."""

from __future__ import annotations

from ..kube.client import KubeClient
from ..kube.serviceaccounts import wait_for_token


async def create_namespace(client: KubeClient, name: str, timeout: float = 20.0) -> None:
    """Create ``name`` and wait until pods can be created in it.

    The ServiceAccount admission plugin refuses pods until the token
    controller has given "default" its token secret.
    """
    await client.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    if not await wait_for_token(client, name, "default", timeout):
        raise TimeoutError(f"namespace {name}: default service account has no token after {timeout:.0f}s")
