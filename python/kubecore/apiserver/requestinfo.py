"""RequestInfo: what a request is about, parsed from its path and method (upstream's
RequestInfoFactory): verb, group/version, namespace, resource, name, subresource."""

from __future__ import annotations

from typing import NamedTuple

NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


class RequestInfo(NamedTuple):
    """A named tuple: built in one call (a frozen dataclass paid a setattr per field, half of
    parsing a request's path); `_replace` makes a changed copy."""

    path: str
    verb: str = ""
    is_resource_request: bool = False
    api_prefix: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: tuple[str, ...] = ()


_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _truthy(v: str | None) -> bool:
    return v is not None and v.lower() in ("1", "true")


def parse(method: str, path: str, query: dict[str, str]) -> RequestInfo:
    """Parses `/api/v1/namespaces/ns/pods/name/status` and friends (apimachinery's request.go)."""
    segs = path.strip("/").split("/")
    if "" in segs:  # empty segments (`//`) do not count
        segs = [s for s in segs if s]
    if not segs or segs[0] not in ("api", "apis"):
        return RequestInfo(path=path, verb=method.lower())
    prefix, rest = segs[0], segs[1:]
    group = ""
    if prefix == "apis":
        if not rest:
            return RequestInfo(path=path, verb=method.lower(), api_prefix=prefix)
        group, rest = rest[0], rest[1:]
    if not rest:
        return RequestInfo(path=path, verb=method.lower(), api_prefix=prefix, group=group)
    version, rest = rest[0], rest[1:]
    if not rest:
        return RequestInfo(path=path, verb=method.lower(), api_prefix=prefix, group=group, version=version)
    verb = _VERBS.get(method) or method.lower()
    namespace = ""
    if rest[0] == "namespaces":
        if len(rest) > 1:
            namespace = rest[1]
            # /namespaces/{ns} is the namespace itself; /namespaces/{ns}/status too.
            if len(rest) == 2 or (len(rest) == 3 and rest[2] in NAMESPACE_SUBRESOURCES):
                parts = tuple(rest)
            else:
                parts = tuple(rest[2:])
        else:
            parts = tuple(rest)
    else:
        parts = tuple(rest)
    resource = parts[0] if parts else ""
    name = parts[1] if len(parts) > 1 else ""
    subresource = parts[2] if len(parts) > 2 else ""
    if resource == "namespaces":
        namespace = ""  # a namespace object is cluster-scoped; its name is in `name`
    if verb == "get" and not name:
        verb = "watch" if _truthy(query.get("watch")) else "list"
    elif verb == "get" and _truthy(query.get("watch")):
        verb = "watch"
    elif verb == "delete" and not name:
        verb = "deletecollection"
    return RequestInfo(path, verb, True, prefix, group, version, namespace, resource, subresource, name, parts)
