"""Kubernetes ``Status`` errors in upstream's exact JSON shape.

Mirrors k8s.io/apimachinery/pkg/api/errors/errors.go: every constructor produces the same
code, reason, message and details that the upstream constructor of the same name produces.

Byte-exactness (``StatusError.body``): key order is metav1.Status' field order (kind, apiVersion,
metadata, status, message, reason, details, code); empty optional fields are omitted as Go's
``omitempty`` does; ``metadata`` is always ``{}``; ``<``, ``>``, ``&`` are escaped as ``\\u003c``,
``\\u003e``, ``\\u0026`` (Go's encoding/json default); a newline ends the body (json.Encoder).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

import msgspec

from kubecore.api.gofmt import go_float

if TYPE_CHECKING:
    from kubecore.api.registry import ResourceType

__all__ = [
    "FieldError", "StatusError", "GroupResource", "GroupKind", "qualified_resource", "qualified_kind",
    "not_found", "already_exists", "generate_name_conflict", "conflict", "invalid", "bad_request",
    "gone", "expired", "method_not_allowed", "unsupported_media_type", "not_acceptable",
    "request_too_large", "forbidden", "unauthorized", "too_many_requests", "service_unavailable",
    "timeout", "internal", "success_status", "aggregate_message", "STATUS_SUCCESS_BODY",
]

_encoder = msgspec.json.Encoder()

# (group, resource) such as ("apps", "deployments"); or a ResourceType.
GroupResource = Union["ResourceType", tuple[str, str]]
# (group, kind) such as ("apps", "Deployment"); or a ResourceType.
GroupKind = Union["ResourceType", tuple[str, str]]


def _go_escape(raw: bytes) -> bytes:
    """Go's encoding/json escapes HTML-significant characters; these bytes only occur inside strings."""
    if b"<" in raw or b">" in raw or b"&" in raw:
        raw = raw.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    if b"\xe2\x80\xa8" in raw or b"\xe2\x80\xa9" in raw:
        raw = raw.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return raw


def encode_go_json(obj: Any) -> bytes:
    """msgspec JSON with Go's HTML escaping, no trailing newline."""
    return _go_escape(_encoder.encode(obj))


def _gr(x: GroupResource) -> tuple[str, str]:
    if isinstance(x, tuple):
        return x
    return (x.group, x.resource)


def _gk(x: GroupKind) -> tuple[str, str]:
    if isinstance(x, tuple):
        return x
    return (x.group, x.kind)


def qualified_resource(x: GroupResource) -> str:
    """schema.GroupResource.String(): ``pods``, ``deployments.apps``."""
    group, resource = _gr(x)
    return f"{resource}.{group}" if group else resource


def qualified_kind(x: GroupKind) -> str:
    """schema.GroupKind.String(): ``Pod``, ``Deployment.apps``."""
    group, kind = _gk(x)
    return f"{kind}.{group}" if group else kind


def go_quote(s: str) -> str:
    """Go's %q for the strings that appear in names and values (control characters escaped as
    strconv.Quote: ASCII ones and DEL as \\xNN, C1 ones as \\uNNNN)."""
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif 0x80 <= ord(ch) < 0xA0:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class FieldError:
    """field.Error: one validation failure at a field path.

    ``type`` is the CauseType (``FieldValueInvalid`` ...); ``body`` is ErrorBody() (the text without
    the field path), built by the constructors below exactly as upstream formats it.
    """

    __slots__ = ("type", "field", "body")

    _TYPE_TEXT = {
        "FieldValueNotFound": "Not found", "FieldValueRequired": "Required value",
        "FieldValueDuplicate": "Duplicate value", "FieldValueInvalid": "Invalid value",
        "FieldValueNotSupported": "Unsupported value", "FieldValueForbidden": "Forbidden",
        "FieldValueTooLong": "Too long", "FieldValueTooMany": "Too many",
        "InternalError": "Internal error", "FieldValueTypeInvalid": "Invalid value",
    }

    def __init__(self, type_: str, field: str, body: str) -> None:
        self.type = type_
        self.field = field
        self.body = body

    @classmethod
    def _make(cls, type_: str, field: str, value: Any, detail: str, *, omit_value: bool) -> FieldError:
        s = cls._TYPE_TEXT[type_]
        if not omit_value:
            s = f"{s}: {_go_value(value)}"
        if detail:
            s += f": {detail}"
        return cls(type_, field, s)

    @classmethod
    def invalid(cls, field: str, value: Any, detail: str) -> FieldError:
        return cls._make("FieldValueInvalid", field, value, detail, omit_value=False)

    @classmethod
    def required(cls, field: str, detail: str = "") -> FieldError:
        return cls._make("FieldValueRequired", field, "", detail, omit_value=True)

    @classmethod
    def forbidden(cls, field: str, detail: str) -> FieldError:
        return cls._make("FieldValueForbidden", field, "", detail, omit_value=True)

    @classmethod
    def not_supported(cls, field: str, value: Any, valid: Sequence[str]) -> FieldError:
        detail = ("supported values: " + ", ".join(go_quote(v) for v in valid)) if valid else ""
        return cls._make("FieldValueNotSupported", field, value, detail, omit_value=False)

    @classmethod
    def too_long(cls, field: str, max_length: int) -> FieldError:
        return cls._make("FieldValueTooLong", field, "", f"must have at most {max_length} bytes", omit_value=True)

    @classmethod
    def duplicate(cls, field: str, value: Any) -> FieldError:
        return cls._make("FieldValueDuplicate", field, value, "", omit_value=False)

    @classmethod
    def internal(cls, field: str, err: str) -> FieldError:
        return cls._make("InternalError", field, None, err, omit_value=True)

    def error(self) -> str:
        return f"{self.field}: {self.body}"

    def cause(self) -> dict[str, str]:
        c: dict[str, str] = {}
        if self.type:
            c["reason"] = self.type
        if self.body:
            c["message"] = self.body
        if self.field:
            c["field"] = self.field
        return c

    def __repr__(self) -> str:
        return f"FieldError({self.error()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldError) and (self.type, self.field, self.body) == (
            other.type, other.field, other.body)

    def __hash__(self) -> int:
        return hash((self.type, self.field, self.body))


def _go_value(value: Any) -> str:
    """How field.Error prints BadValue: %q for strings, %v for numbers/bools, null for nil."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, (list, tuple)):
        return "[]string{" + ", ".join(go_quote(str(v)) for v in value) + "}"
    return encode_go_json(value).decode()


def aggregate_message(messages: Iterable[str]) -> str:
    """utilerrors.Aggregate.Error(): one message as is, several (deduplicated) as ``[a, b]``."""
    seen: list[str] = []
    for m in messages:
        if m not in seen:
            seen.append(m)
    if not seen:
        return ""
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


class StatusError(Exception):
    """An error that the API server turns into a ``Status`` response."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.list_meta: dict[str, Any] = {}  # Status.metadata (ListMeta): `continue` of an expired token

    def status(self) -> dict[str, Any]:
        s: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.list_meta), "status": "Failure"}
        if self.message:
            s["message"] = self.message
        if self.reason:
            s["reason"] = self.reason
        if self.details:
            s["details"] = self.details
        if self.code:
            s["code"] = self.code
        return s

    def body(self) -> bytes:
        return encode_go_json(self.status()) + b"\n"

    def __repr__(self) -> str:
        return f"StatusError({self.code}, {self.reason!r}, {self.message!r})"


def _details(*, name: str = "", group: str = "", kind: str = "", uid: str = "",
             causes: list[dict[str, str]] | None = None, retry_after_seconds: int = 0) -> dict[str, Any] | None:
    d: dict[str, Any] = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    if kind:
        d["kind"] = kind
    if uid:
        d["uid"] = uid
    if causes:
        d["causes"] = causes
    if retry_after_seconds:
        d["retryAfterSeconds"] = retry_after_seconds
    return d or None


def not_found(gr: GroupResource, name: str) -> StatusError:
    group, resource = _gr(gr)
    return StatusError(404, "NotFound", f"{qualified_resource(gr)} {go_quote(name)} not found",
                       _details(name=name, group=group, kind=resource))


def already_exists(gr: GroupResource, name: str) -> StatusError:
    group, resource = _gr(gr)
    return StatusError(409, "AlreadyExists", f"{qualified_resource(gr)} {go_quote(name)} already exists",
                       _details(name=name, group=group, kind=resource))


def generate_name_conflict(gr: GroupResource, name: str, retry_after_seconds: int = 1) -> StatusError:
    group, resource = _gr(gr)
    msg = (f"{qualified_resource(gr)} {go_quote(name)} already exists, "
           "the server was not able to generate a unique name for the object")
    return StatusError(409, "AlreadyExists", msg, _details(
        name=name, group=group, kind=resource, retry_after_seconds=retry_after_seconds))


OPTIMISTIC_LOCK_MSG = "the object has been modified; please apply your changes to the latest version and try again"


def conflict(gr: GroupResource, name: str, msg: str = OPTIMISTIC_LOCK_MSG) -> StatusError:
    group, resource = _gr(gr)
    return StatusError(409, "Conflict",
                       f"Operation cannot be fulfilled on {qualified_resource(gr)} {go_quote(name)}: {msg}",
                       _details(name=name, group=group, kind=resource))


def invalid(gk: GroupKind, name: str, causes: Sequence[FieldError | Mapping[str, str]]) -> StatusError:
    """NewInvalid. ``causes`` are FieldErrors or cause dicts (reason, message, field)."""
    errs = [c if isinstance(c, FieldError) else
            FieldError(c.get("reason", ""), c.get("field", ""), c.get("message", "")) for c in causes]
    group, kind = _gk(gk)
    agg = aggregate_message(e.error() for e in errs)
    q = qualified_kind(gk)
    message = f"{q} {go_quote(name)} is invalid: {agg}" if agg else f"{q} {go_quote(name)} is invalid"
    return StatusError(422, "Invalid", message, _details(
        name=name, group=group, kind=kind, causes=[e.cause() for e in errs]) or {})


def bad_request(msg: str) -> StatusError:
    return StatusError(400, "BadRequest", msg)


def gone(msg: str) -> StatusError:
    """NewGone (reason Gone)."""
    return StatusError(410, "Gone", msg)


def expired(msg: str, *, continue_token: str = "") -> StatusError:
    """NewResourceExpired (reason Expired): what LIST/WATCH return for a compacted resourceVersion;
    for an expired continue token, `continue_token` continues the list at the latest revision."""
    e = StatusError(410, "Expired", msg)
    if continue_token:
        e.list_meta["continue"] = continue_token
    return e


def method_not_allowed(gr: GroupResource, action: str) -> StatusError:
    group, resource = _gr(gr)
    return StatusError(405, "MethodNotAllowed",
                       f"{action} is not supported on resources of kind {go_quote(qualified_resource(gr))}",
                       _details(group=group, kind=resource))


DEFAULT_BODY_MEDIA_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")


def unsupported_media_type(content_type: str = "", accepted: Sequence[str] = DEFAULT_BODY_MEDIA_TYPES) -> StatusError:
    """negotiation.NewUnsupportedMediaTypeError: the message names what is accepted, not ``content_type``."""
    del content_type  # upstream does not echo it
    return StatusError(415, "UnsupportedMediaType",
                       "the body of the request was in an unknown format - accepted media types include: "
                       + ", ".join(accepted))


def not_acceptable(accepted: Sequence[str]) -> StatusError:
    """negotiation.NewNotAcceptableError."""
    return StatusError(406, "NotAcceptable",
                       "only the following media types are accepted: " + ", ".join(accepted))


def request_too_large(msg: str) -> StatusError:
    return StatusError(413, "RequestEntityTooLarge", f"Request entity too large: {msg}")


def forbidden(gr: GroupResource | None, name: str, reason_msg: str) -> StatusError:
    if gr is None or not qualified_resource(gr):
        return StatusError(403, "Forbidden", f"forbidden: {reason_msg}", _details(name=name))
    group, resource = _gr(gr)
    q = qualified_resource(gr)
    msg = f"{q} is forbidden: {reason_msg}" if not name else f"{q} {go_quote(name)} is forbidden: {reason_msg}"
    return StatusError(403, "Forbidden", msg, _details(name=name, group=group, kind=resource))


def unauthorized(msg: str = "") -> StatusError:
    return StatusError(401, "Unauthorized", msg or "not authorized")


def too_many_requests(msg: str, retry_after_seconds: int) -> StatusError:
    """NewTooManyRequests (message as given, details.retryAfterSeconds)."""
    return StatusError(429, "TooManyRequests", msg, _details(retry_after_seconds=retry_after_seconds))


def service_unavailable(msg: str) -> StatusError:
    return StatusError(503, "ServiceUnavailable", msg)


def timeout(msg: str, retry_after_seconds: int = 0) -> StatusError:
    """NewTimeoutError (504)."""
    return StatusError(504, "Timeout", f"Timeout: {msg}", _details(retry_after_seconds=retry_after_seconds))


def internal(msg: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {msg}",
                       {"causes": [{"message": msg}]})


def success_status(*, name: str = "", group: str = "", kind: str = "", uid: str = "") -> dict[str, Any]:
    """The Status a DELETE returns when the object is gone at once (kind is the resource, e.g. ``pods``)."""
    s: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    d = _details(name=name, group=group, kind=kind, uid=uid)
    if d:
        s["details"] = d
    return s


STATUS_SUCCESS_BODY = encode_go_json(success_status()) + b"\n"
