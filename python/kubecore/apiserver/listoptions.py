"""ListOptions checks every LIST and WATCH gets before it is served (upstream's
ValidateListOptions and the storage layer's continue rule), with upstream's Status texts."""

from __future__ import annotations

from collections.abc import Mapping

from kubecore.api import errors
from kubecore.api.errors import FieldError

MATCHES = ("Exact", "NotOlderThan")


def validate(query: Mapping[str, str], *, watch: bool) -> None:
    rv, match = query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
    token = query.get("continue", "")
    causes: list[FieldError] = []
    if match:
        if not rv:
            causes.append(FieldError.forbidden("resourceVersionMatch",
                                               "resourceVersionMatch is forbidden unless resourceVersion is provided"))
        if token:
            causes.append(FieldError.forbidden("resourceVersionMatch",
                                               "resourceVersionMatch is forbidden when continue is provided"))
        if match == "Exact" and rv == "0":
            causes.append(FieldError.forbidden("resourceVersionMatch",
                                               'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        elif match not in MATCHES:
            causes.append(FieldError.not_supported("resourceVersionMatch", match, [*MATCHES, ""]))
    if "sendInitialEvents" in query:
        if match != "NotOlderThan":
            causes.append(FieldError.forbidden(
                "resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
        if not watch:
            causes.append(FieldError.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if causes:
        raise errors.invalid(("meta.k8s.io", "ListOptions"), "", causes)
    if token and rv not in ("", "0") and not watch:
        raise errors.bad_request("specifying resource version is not allowed when using continue")
