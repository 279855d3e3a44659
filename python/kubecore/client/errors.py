"""Typed errors for the REST client: one exception class per Kubernetes `Status` reason.

A failed request becomes an `ApiError` subclass chosen the way apimachinery's `errors.ReasonForError`
and the `Is*` helpers do: by the Status' `reason` when the server sent one, otherwise by the HTTP
code (a proxy's bare 503 is still `ServiceUnavailable`). The decoded `Status` travels with the
exception (`err.status`, a plain dict), together with `code`, `reason`, `message`, `details` and,
for 429/5xx, the server's `Retry-After` hint in seconds (`retry_after`) or, failing that, the
Status' `details.retryAfterSeconds`.

    try:
        await pods.get("web-0", namespace="default")
    except NotFound:
        ...
    except Gone:          # 410: also what a too-old resourceVersion gets (reason "Expired" or "Gone")
        ...

`Expired` (reason "Expired") is a subclass of `Gone`, so `except Gone` catches both, as
`apierrors.IsResourceExpired` || `IsGone` does upstream. Transport failures (connection refused,
reset, a body cut short) are `TransportError`, which is not an `ApiError`: no Status exists.
"""

from __future__ import annotations

from typing import Any

import msgspec


class ClientError(Exception):
    """Base of everything the client raises on purpose."""


class TransportError(ClientError):
    """The request never got an HTTP answer (connection refused/reset, timeout, truncated body)."""


class ApiError(ClientError):
    """The server answered with a non-2xx code; `status` is its Status object (or one made up)."""

    code: int = 0
    reason: str = ""

    def __init__(self, status: dict[str, Any], *, code: int, retry_after: float | None = None) -> None:
        self.status = status
        self.code = code
        self.reason = str(status.get("reason") or type(self).reason or "")
        self.message = str(status.get("message") or "")
        details = status.get("details")
        self.details: dict[str, Any] = details if isinstance(details, dict) else {}
        if retry_after is None:
            ras = self.details.get("retryAfterSeconds")
            retry_after = float(ras) if isinstance(ras, (int, float)) and ras > 0 else None
        self.retry_after = retry_after
        super().__init__(f"{code} {self.reason}: {self.message}" if self.message else f"{code} {self.reason}")


class BadRequest(ApiError):
    code, reason = 400, "BadRequest"


class Unauthorized(ApiError):
    code, reason = 401, "Unauthorized"


class Forbidden(ApiError):
    code, reason = 403, "Forbidden"


class NotFound(ApiError):
    code, reason = 404, "NotFound"


class MethodNotAllowed(ApiError):
    code, reason = 405, "MethodNotAllowed"


class NotAcceptable(ApiError):
    code, reason = 406, "NotAcceptable"


class Conflict(ApiError):
    code, reason = 409, "Conflict"


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists (a create of a name that exists)."""

    reason = "AlreadyExists"


class Gone(ApiError):
    """410: the resourceVersion asked for is older than the server still has."""

    code, reason = 410, "Gone"


class Expired(Gone):
    code, reason = 410, "Expired"


class RequestEntityTooLarge(ApiError):
    code, reason = 413, "RequestEntityTooLarge"


class UnsupportedMediaType(ApiError):
    code, reason = 415, "UnsupportedMediaType"


class Invalid(ApiError):
    """422: the object failed validation; `causes` lists the fields."""

    code, reason = 422, "Invalid"

    @property
    def causes(self) -> list[dict[str, Any]]:
        causes = self.details.get("causes")
        return causes if isinstance(causes, list) else []


class TooManyRequests(ApiError):
    code, reason = 429, "TooManyRequests"


class InternalError(ApiError):
    code, reason = 500, "InternalError"


class ServiceUnavailable(ApiError):
    code, reason = 503, "ServiceUnavailable"


class ServerTimeout(ApiError):
    code, reason = 504, "Timeout"


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequest, "Unauthorized": Unauthorized, "Forbidden": Forbidden,
    "NotFound": NotFound, "MethodNotAllowed": MethodNotAllowed, "NotAcceptable": NotAcceptable,
    "Conflict": Conflict, "AlreadyExists": AlreadyExists, "Gone": Gone, "Expired": Expired,
    "RequestEntityTooLarge": RequestEntityTooLarge, "UnsupportedMediaType": UnsupportedMediaType,
    "Invalid": Invalid, "TooManyRequests": TooManyRequests, "InternalError": InternalError,
    "ServiceUnavailable": ServiceUnavailable, "Timeout": ServerTimeout, "ServerTimeout": ServerTimeout,
}

_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
    406: NotAcceptable, 409: Conflict, 410: Gone, 413: RequestEntityTooLarge, 415: UnsupportedMediaType,
    422: Invalid, 429: TooManyRequests, 500: InternalError, 503: ServiceUnavailable, 504: ServerTimeout,
}


def status_from_body(body: bytes, *, code: int) -> dict[str, Any]:
    """The Status the server sent, or one made up from the code and body text (upstream's
    `newUnstructuredResponseError`: a non-Status body becomes the message)."""
    try:
        decoded = msgspec.json.decode(body) if body else None
    except msgspec.DecodeError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        return decoded
    text = body.decode("utf-8", errors="replace").strip()[:1024]
    cls = _BY_CODE.get(code)
    reason = cls.reason if cls is not None else ("InternalError" if code >= 500 else "Unknown")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": code,
            "reason": reason, "message": text or f"the server returned HTTP {code}"}


def error_for(status: dict[str, Any], *, code: int, retry_after: float | None = None) -> ApiError:
    """The typed exception for a failure Status (reason first, HTTP code second)."""
    reason = status.get("reason")
    cls = _BY_REASON.get(reason) if isinstance(reason, str) else None
    if cls is None:
        cls = _BY_CODE.get(code)
    if cls is None:
        cls = InternalError if code >= 500 else ApiError
    return cls(status, code=code, retry_after=retry_after)


def is_expired(err: BaseException) -> bool:
    """410 Gone or Expired: the resourceVersion asked for has been compacted away."""
    return isinstance(err, Gone)
