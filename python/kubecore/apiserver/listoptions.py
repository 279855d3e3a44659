"""ListOptions checks every LIST and WATCH gets before it is served (upstream's
ValidateListOptions and the storage layer's continue rule), with upstream's Status texts."""

from __future__ import annotations

from collections.abc import Mapping

from kubecore.api import errors
from kubecore.api.errors import FieldError

MATCHES = ("Exact", "NotOlderThan")


def validate(query: Mapping[str, str], *, watch: bool) -> None:
    causes = _watch_causes(query) if watch else _list_causes(query)
    if causes:
        raise errors.invalid(("meta.k8s.io", "ListOptions"), "", causes)
    rv, token = query.get("resourceVersion", ""), query.get("continue", "")
    if token and rv not in ("", "0") and not watch:
        raise errors.bad_request("specifying resource version is not allowed when using continue")


def _list_causes(query: Mapping[str, str]) -> list[FieldError]:
    rv, match = query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
    causes: list[FieldError] = []
    if match:
        if not rv:
            causes.append(FieldError.forbidden("resourceVersionMatch",
                                               "resourceVersionMatch is forbidden unless resourceVersion is provided"))
        if query.get("continue", ""):
            causes.append(FieldError.forbidden("resourceVersionMatch",
                                               "resourceVersionMatch is forbidden when continue is provided"))
        if match == "Exact" and rv == "0":
            causes.append(FieldError.forbidden("resourceVersionMatch",
                                               'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        elif match not in MATCHES:
            causes.append(FieldError.not_supported("resourceVersionMatch", match, [*MATCHES, ""]))
    if "sendInitialEvents" in query:
        causes.append(FieldError.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return causes


def _watch_causes(query: Mapping[str, str]) -> list[FieldError]:
    """validateWatchOptions: resourceVersionMatch only with sendInitialEvents, and only
    NotOlderThan (a streaming list: client-go's first request is resourceVersion="" +
    sendInitialEvents=true + resourceVersionMatch=NotOlderThan)."""
    match = query.get("resourceVersionMatch", "")
    send_initial = "sendInitialEvents" in query
    causes: list[FieldError] = []
    if send_initial and match != "NotOlderThan":
        causes.append(FieldError.forbidden(
            "resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
    if match:
        if not send_initial:
            causes.append(FieldError.forbidden(
                "resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
        if match != "NotOlderThan":
            causes.append(FieldError.not_supported("resourceVersionMatch", match, ["NotOlderThan"]))
        if query.get("continue", ""):
            causes.append(FieldError.forbidden("resourceVersionMatch",
                                               "resourceVersionMatch is forbidden when continue is provided"))
    return causes
