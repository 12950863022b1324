"""Typed errors for answers from the Kubernetes API (kube/, used by every layer)."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """The API server answered with an error Status."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}" if message else f"{code} {reason}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    @classmethod
    def from_status(cls, status: dict[str, Any], fallback_code: int = 0) -> ApiError:
        code = int(status.get("code") or fallback_code)
        error_class = _BY_CODE.get(code, ApiError)
        return error_class(code, status.get("reason", ""), status.get("message", ""), status.get("details"))


class NotFound(ApiError):
    """404: the object or the resource does not exist."""


class Conflict(ApiError):
    """409: already exists, or resourceVersion mismatch."""


class Gone(ApiError):
    """410: the requested resourceVersion is too old; relist."""


class TooManyRequests(ApiError):
    """429: the server asks us to slow down (see ``retry_after``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after: float | None = None


_BY_CODE: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 410: Gone, 429: TooManyRequests}


class UnboundedList(ValueError):
    """A LIST without ``limit``: one answer holding a whole cluster. Page it (KubeClient.list_objects)."""


def describe(error: BaseException) -> str:
    """``Type: message`` for a log line, never ``Type: `` with nothing after it.

    httpx's timeouts carry no message; then the type names it, with the cause's message if it has one.
    """
    name = type(error).__name__
    text = str(error).strip()
    if text:
        return f"{name}: {text}"
    cause = error.__cause__ or error.__context__
    if cause is not None and str(cause).strip():
        return f"{name} ({type(cause).__name__}: {str(cause).strip()})"
    return name
