"""Bearer-token authentication of the API (web/): who may read and change the model.

Off only when the server listens on loopback and no token is configured;
``kuberaven run`` refuses to listen elsewhere without a token. Probes
(/healthz, /readyz) and /metrics stay open: they carry no model data.
"""

from __future__ import annotations

import hmac
import ipaddress
from pathlib import Path

from fastapi import HTTPException, Request


class TokenError(Exception):
    """The token configuration is unusable (unreadable file, empty token, public listener without one)."""


def load_token(token: str | None, token_file: str | None) -> str | None:
    """The configured token: the file's first line wins over the value."""
    if token_file:
        try:
            text = Path(token_file).read_text().strip()
        except OSError as error:
            raise TokenError(f"token file {token_file}: {error.strerror}") from None
        if not text:
            raise TokenError(f"token file {token_file} is empty")
        return text.splitlines()[0]
    if token is not None and not token.strip():
        raise TokenError("the API token is blank: set a non-empty KUBERAVEN_TOKEN, or none at all")
    return token or None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def require_token_off_loopback(host: str, token: str | None) -> None:
    if token is None and not is_loopback(host):
        raise TokenError(
            f"listening on {host} needs an API token: set KUBERAVEN_TOKEN_FILE (or KUBERAVEN_TOKEN, --token-file)"
        )


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
