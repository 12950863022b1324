"""Service account tokens (kube/): what pods in a new namespace wait for.

On Kubernetes before 1.24 the ServiceAccount admission plugin refuses a pod
until the token controller has given its service account a token secret,
which takes a moment after the namespace or the account is created.
"""

from __future__ import annotations

import asyncio
import contextlib

from .client import KubeClient
from .errors import NotFound


async def wait_for_token(client: KubeClient, namespace: str, account: str = "default", timeout: float = 10.0) -> bool:
    """Wait until ``namespace/account`` has its token secret; False if it has none after ``timeout``."""
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        with contextlib.suppress(NotFound):
            if (await client.request("GET", path)).get("secrets"):
                return True
        await asyncio.sleep(0.1)
    return False
