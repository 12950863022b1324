"""A log line names a failure's cause even when the exception has no message (kube/errors.py: describe)."""

from __future__ import annotations

import httpx2 as httpx

from kuberaven.kube.errors import ApiError, describe


def test_an_error_with_a_message_is_type_and_message() -> None:
    assert describe(ApiError(500, "InternalError", "etcd is down")) == "ApiError: 500 InternalError: etcd is down"


def test_an_empty_timeout_is_named_by_its_type_never_followed_by_nothing() -> None:
    assert describe(httpx.ReadTimeout("")) == "ReadTimeout"


def test_an_empty_error_borrows_its_causes_message() -> None:
    try:
        try:
            raise OSError(113, "No route to host")
        except OSError as cause:
            raise httpx.ConnectError("") from cause
    except httpx.ConnectError as error:
        assert describe(error) == "ConnectError (OSError: [Errno 113] No route to host)"
