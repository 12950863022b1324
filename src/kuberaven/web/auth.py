"""Bearer-token authentication of the API (web/): who may read and change the model.

Off only when the server listens on loopback and no token is configured;
``kuberaven run`` refuses to listen elsewhere without a token. Probes
(/healthz, /readyz) and /metrics stay open: they carry no model data.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

# Where they were first: the token's configuration is read by `kuberaven run` before any web framework loads.
from .tokens import TokenError, is_loopback, load_token, require_token_off_loopback

__all__ = ["QUERY_TOKEN_PATHS", "BearerToken", "TokenError", "is_loopback", "load_token", "require_token_off_loopback"]


# The one endpoint a browser cannot send a header to (EventSource): it alone takes ?access_token=,
# which otherwise would end up in proxies' logs.
QUERY_TOKEN_PATHS = frozenset({"/api/v1/events/stream"})


class BearerToken:
    """FastAPI dependency: 401 unless the request carries the token (header; ?access_token= on the event stream)."""

    def __init__(self, token: str | None) -> None:
        self.token = token

    def __call__(self, request: Request) -> None:
        if self.token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            given = request.query_params.get("access_token", "") if request.url.path in QUERY_TOKEN_PATHS else ""
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            raise HTTPException(
                401,
                "missing or wrong API token (send Authorization: Bearer <token>)",
                headers={"WWW-Authenticate": "Bearer"},
            )
