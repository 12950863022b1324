"""The API token's configuration (web/, read by ``kuberaven run`` at start): which token, and whether one is needed.

Apart from auth.py (the FastAPI dependency that checks requests) so that reading the settings loads no web
framework: the daemon imports FastAPI only when the REST API is first asked for (probes.py).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path


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
