"""CustomResourceDefinition (apiextensions.k8s.io/v1) defaulting, strategy and validation.

Ports apis/apiextensions/v1/defaults.go, registry/customresourcedefinition/strategy.go and
apis/apiextensions/validation/validation.go (the parts a v1 CRD can reach). Field paths are the
internal type's, as upstream reports them: a schema, subresources or printer columns that are
the same in every version are reported at the top level (``spec.validation.openAPIV3Schema``,
``spec.subresources``, ``spec.additionalPrinterColumns[0].JSONPath``) because the v1->internal
conversion hoists them there; otherwise per version (``spec.versions[1].schema...``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from kubecore.api.crd_schema import validate_schema
from kubecore.api.errors import FieldError, encode_go_json
from kubecore.api.validation import is_dns1035_label, is_dns1123_subdomain, name_is_dns_subdomain

__all__ = [
    "CLEANUP_FINALIZER", "set_defaults", "prepare_create", "prepare_update", "validate_create",
    "validate_update", "validate_status_update", "storage_version", "condition_true", "APPROVAL_ANNOTATION",
]

Obj = dict[str, Any]
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
_COLUMN_TYPES = "boolean,date,integer,number,string"
_COLUMN_FORMATS = ("byte", "date", "date-time", "double", "float", "int32", "int64", "password")
_APPROVAL_PR = "https://github.com/kubernetes/enhancements/pull/1111"


def _d(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ""


# ---- defaulting and strategy -------------------------------------------------------------------

def set_defaults(crd: Obj) -> Obj:
    """SetDefaults_CustomResourceDefinitionSpec: singular, listKind, conversion strategy None,
    webhook service port 443."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return crd
    names = spec.setdefault("names", {})
    if isinstance(names, dict):
        kind = _s(names.get("kind"))
        if not names.get("singular"):
            names["singular"] = kind.lower()
        if not names.get("listKind") and kind:
            names["listKind"] = kind + "List"
    conv = spec.get("conversion")
    if conv is None:
        spec["conversion"] = {"strategy": "None"}
    elif isinstance(conv, dict):
        svc = _d(_d(_d(conv.get("webhook")).get("clientConfig")).get("service"))
        if svc and "port" not in svc:
            svc["port"] = 443
    return crd


def storage_version(crd: Mapping[str, Any]) -> str:
    for v in _l(_d(crd.get("spec")).get("versions")):
        if isinstance(v, dict) and v.get("storage"):
            return _s(v.get("name"))
    return ""


def prepare_create(crd: Obj) -> None:
    """PrepareForCreate: a fresh status with the storage version as the only stored version."""
    status: Obj = {"acceptedNames": {"plural": "", "kind": ""}}
    sv = storage_version(crd)
    if sv:
        status["storedVersions"] = [sv]
    crd["status"] = status


def prepare_update(new: Obj, old: Mapping[str, Any]) -> None:
    """PrepareForUpdate: status is the old one, plus the (new) storage version if it was never stored."""
    new["status"] = copy.deepcopy(old.get("status")) if old.get("status") is not None else {}
    sv = storage_version(new)
    stored = new["status"].setdefault("storedVersions", [])
    if sv and sv not in stored:
        stored.append(sv)


def condition_true(crd: Mapping[str, Any], ctype: str) -> bool:
    return any(isinstance(c, dict) and c.get("type") == ctype and c.get("status") == "True"
               for c in _l(_d(crd.get("status")).get("conditions")))


# ---- the internal view: what the v1 -> internal conversion hoists to the top level ---------------

@dataclass
class _View:
    versions: list[Obj]
    validation: Obj | None          # spec.validation (hoisted schema holder), or None
    subresources: Obj | None
    columns: list[Any] | None
    hoisted_schema: bool
    hoisted_subresources: bool
    hoisted_columns: bool

    def version_subresources(self, v: Obj) -> Obj | None:
        sub = self.subresources if self.hoisted_subresources else v.get("subresources")
        return sub if isinstance(sub, dict) else None


def _view(spec: Obj) -> _View:
    versions = [v if isinstance(v, dict) else {} for v in _l(spec.get("versions"))]

    def same(key: str) -> bool:
        return bool(versions) and all(v.get(key) == versions[0].get(key) for v in versions)

    hs, hsub, hcol = same("schema"), same("subresources"), same("additionalPrinterColumns")
    first = versions[0] if versions else {}
    return _View(
        versions=versions,
        validation=first.get("schema") if hs and isinstance(first.get("schema"), dict) else None,
        subresources=first.get("subresources") if hsub and isinstance(first.get("subresources"), dict) else None,
        columns=first.get("additionalPrinterColumns") if hcol and isinstance(first.get("additionalPrinterColumns"), list) else None,
        hoisted_schema=hs, hoisted_subresources=hsub, hoisted_columns=hcol,
    )


def _go_struct_versions(view: _View) -> str:
    """json.Marshal of the internal []CustomResourceDefinitionVersion (no JSON tags: Go names)."""
    out = []
    for v in view.versions:
        schema = None if view.hoisted_schema or v.get("schema") is None else {"OpenAPIV3Schema": _d(v.get("schema")).get("openAPIV3Schema")}
        out.append({
            "Name": _s(v.get("name")), "Served": bool(v.get("served")), "Storage": bool(v.get("storage")),
            "Deprecated": bool(v.get("deprecated")), "DeprecationWarning": v.get("deprecationWarning"),
            "Schema": schema,
            "Subresources": None if view.hoisted_subresources else v.get("subresources"),
            "AdditionalPrinterColumns": None if view.hoisted_columns else v.get("additionalPrinterColumns"),
            "SelectableFields": v.get("selectableFields"),
        })
    return encode_go_json(out).decode()


def _invalid_raw(field: str, rendered: str, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", field, f"Invalid value: {rendered}: {detail}")


# ---- spec ----------------------------------------------------------------------------------------

def _group_errors(group: str) -> list[FieldError]:
    if not group:
        return [FieldError.required("spec.group")]
    msgs = is_dns1123_subdomain(group)
    if msgs:
        return [FieldError.invalid("spec.group", group, ",".join(msgs))]
    if len(group.split(".")) < 2:
        return [FieldError.invalid("spec.group", group, "should be a domain with at least one dot")]
    return []


def _enum(field: str, value: Any, accepted: list[str]) -> list[FieldError]:
    if not value:
        return [FieldError.required(field)]
    return [] if value in accepted else [FieldError.not_supported(field, value, accepted)]


def _version_errors(v: Obj, i: int, view: _View) -> list[FieldError]:
    errs: list[FieldError] = []
    path = f"spec.versions[{i}]"
    warning = v.get("deprecationWarning")
    if warning is not None:
        if not v.get("deprecated"):
            errs.append(FieldError.invalid(f"{path}.deprecationWarning", warning, "can only be set for deprecated versions"))
        elif len(_s(warning)) > 256:
            errs.append(FieldError.invalid(f"{path}.deprecationWarning", warning, "must be <= 256 characters long"))
        elif _s(warning) == "":
            errs.append(FieldError.invalid(f"{path}.deprecationWarning", warning, "must not be an empty string"))
    if not view.hoisted_schema:
        errs.extend(_validation_errors(v.get("schema"), f"{path}.schema",
                                       status_enabled="status" in _d(view.version_subresources(v))))
    if not view.hoisted_subresources:
        errs.extend(_subresource_errors(v.get("subresources"), f"{path}.subresources"))
    if not view.hoisted_columns:
        for j, col in enumerate(_l(v.get("additionalPrinterColumns"))):
            errs.extend(_column_errors(_d(col), f"{path}.additionalPrinterColumns[{j}]"))
    return errs


def _validation_errors(holder: Any, path: str, *, status_enabled: bool) -> list[FieldError]:
    schema = _d(holder).get("openAPIV3Schema")
    if not isinstance(schema, dict):
        return []
    return validate_schema(schema, path, status_enabled=status_enabled)


def _simple_json_path(s: str, field: str) -> list[FieldError]:
    if not s:
        return [FieldError.invalid(field, s, "must not be empty")]
    if not s.startswith("."):
        return [FieldError.invalid(field, s, "must be a simple json path starting with .")]
    return []


def _subresource_errors(sub: Any, path: str) -> list[FieldError]:
    scale = _d(sub).get("scale")
    if not isinstance(scale, dict):
        return []
    errs: list[FieldError] = []
    for key, prefix, where in (("specReplicasPath", ".spec.", ".spec"), ("statusReplicasPath", ".status.", ".status")):
        field, value = f"{path}.scale.{key}", _s(scale.get(key))
        if not value:
            errs.append(FieldError.required(field))
        elif _simple_json_path(value, field):
            errs.extend(_simple_json_path(value, field))
        elif not value.startswith(prefix):
            errs.append(FieldError.invalid(field, value, f"should be a json path under {where}"))
    selector = _s(scale.get("labelSelectorPath"))
    if selector:
        field = f"{path}.scale.labelSelectorPath"
        if _simple_json_path(selector, field):
            errs.extend(_simple_json_path(selector, field))
        elif not selector.startswith((".spec.", ".status.")):
            errs.append(FieldError.invalid(field, selector, "should be a json path under either .spec or .status"))
    return errs


def _column_errors(col: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not col.get("name"):
        errs.append(FieldError.required(f"{path}.name"))
    typ = _s(col.get("type"))
    if not typ:
        errs.append(FieldError.required(f"{path}.type", f"must be one of {_COLUMN_TYPES}"))
    elif typ not in _COLUMN_TYPES.split(","):
        errs.append(FieldError.invalid(f"{path}.type", typ, f"must be one of {_COLUMN_TYPES}"))
    fmt = _s(col.get("format"))
    if fmt and fmt not in _COLUMN_FORMATS:
        errs.append(FieldError.invalid(f"{path}.format", fmt, f"must be one of {','.join(_COLUMN_FORMATS)}"))
    jp = _s(col.get("jsonPath"))
    if not jp:
        errs.append(FieldError.required(f"{path}.JSONPath"))
    else:
        errs.extend(_simple_json_path(jp, f"{path}.JSONPath"))
    return errs


def names_errors(names: Any, path: str) -> list[FieldError]:
    """ValidateCustomResourceDefinitionNames."""
    n = _d(names)
    errs: list[FieldError] = []
    for key in ("plural", "singular"):
        value = _s(n.get(key))
        if value and is_dns1035_label(value):
            errs.append(FieldError.invalid(f"{path}.{key}", value, ",".join(is_dns1035_label(value))))
    for key in ("kind", "listKind"):
        value = _s(n.get(key))
        if value and is_dns1035_label(value.lower()):
            errs.append(FieldError.invalid(f"{path}.{key}", value, "may have mixed case, but should otherwise match: "
                                           + ",".join(is_dns1035_label(value.lower()))))
    for i, short in enumerate(_l(n.get("shortNames"))):
        if is_dns1035_label(_s(short)):
            errs.append(FieldError.invalid(f"{path}.shortNames[{i}]", short, ",".join(is_dns1035_label(_s(short)))))
    if n.get("kind") and n.get("kind") == n.get("listKind"):
        errs.append(FieldError.invalid(f"{path}.listKind", n.get("listKind"), "kind and listKind may not be the same"))
    for i, cat in enumerate(_l(n.get("categories"))):
        if is_dns1035_label(_s(cat)):
            errs.append(FieldError.invalid(f"{path}.categories[{i}]", cat, ",".join(is_dns1035_label(_s(cat)))))
    return errs


def _versions_errors(spec: Obj, view: _View) -> list[FieldError]:
    errs: list[FieldError] = []
    if view.validation is None:
        for i, v in enumerate(view.versions):
            if not isinstance(_d(v.get("schema")).get("openAPIV3Schema"), dict):
                errs.append(FieldError.required(f"spec.versions[{i}].schema.openAPIV3Schema"))
    storage, seen, unique = 0, set(), True
    for i, v in enumerate(view.versions):
        storage += 1 if v.get("storage") else 0
        name = _s(v.get("name"))
        unique = unique and name not in seen
        seen.add(name)
        if is_dns1035_label(name):
            errs.append(FieldError.invalid(f"spec.versions[{i}].name", name, ",".join(is_dns1035_label(name))))
        errs.extend(_version_errors(v, i, view))
    if not unique:
        errs.append(_invalid_raw("spec.versions", _go_struct_versions(view), "must contain unique version names"))
    if storage != 1:
        errs.append(_invalid_raw("spec.versions", _go_struct_versions(view),
                                 "must have exactly one version marked as storage version"))
    return errs


def _spec_errors(spec: Obj) -> list[FieldError]:
    view = _view(spec)
    errs = _group_errors(_s(spec.get("group")))
    errs += _enum("spec.scope", spec.get("scope"), ["Cluster", "Namespaced"])
    errs += _versions_errors(spec, view)
    names = _d(spec.get("names"))
    for key in ("plural", "singular", "kind", "listKind"):
        if not names.get(key):
            errs.append(FieldError.required(f"spec.names.{key}"))
    errs += names_errors(names, "spec.names")
    any_status = any("status" in _d(view.version_subresources(v)) for v in view.versions)
    errs += _validation_errors(view.validation, "spec.validation", status_enabled=any_status)
    errs += _subresource_errors(view.subresources, "spec.subresources")
    for i, col in enumerate(view.columns or []):
        errs += _column_errors(_d(col), f"spec.additionalPrinterColumns[{i}]")
    errs += _conversion_errors(spec.get("conversion"))
    return errs


def _conversion_errors(conv: Any) -> list[FieldError]:
    if not isinstance(conv, dict):
        return []
    strategy = conv.get("strategy")
    errs = _enum("spec.conversion.strategy", strategy, ["None", "Webhook"])
    webhook = _d(conv.get("webhook"))
    client = webhook.get("clientConfig")
    review = _l(webhook.get("conversionReviewVersions"))
    if strategy == "Webhook":
        if not isinstance(client, dict):
            errs.append(FieldError.required("spec.conversion.webhookClientConfig", "required when strategy is set to Webhook"))
        elif ("url" in client) == ("service" in client):
            errs.append(FieldError.required("spec.conversion.webhookClientConfig", "exactly one of url or service is required"))
        elif "url" in client:
            errs.extend(_webhook_url_errors(_s(client.get("url")), "spec.conversion.webhookClientConfig.url"))
        if not review:
            errs.append(FieldError.required("spec.conversion.conversionReviewVersions"))
        elif not {"v1", "v1beta1"} & set(review):
            errs.append(FieldError.invalid("spec.conversion.conversionReviewVersions", review,
                                           "must include at least one of v1, v1beta1"))
    else:
        if client is not None:
            errs.append(FieldError.forbidden("spec.conversion.webhookClientConfig", "should not be set when strategy is not set to Webhook"))
        if review:
            errs.append(FieldError.forbidden("spec.conversion.conversionReviewVersions", "should not be set when strategy is not set to Webhook"))
    return errs


def _webhook_url_errors(url: str, field: str) -> list[FieldError]:
    form = "; desired format: https://host[/path]"
    u = urlsplit(url)
    errs: list[FieldError] = []
    if u.scheme != "https":
        errs.append(FieldError.invalid(field, u.scheme, "'https' is the only allowed URL scheme" + form))
    if not u.netloc:
        errs.append(FieldError.invalid(field, u.netloc, "host must be specified" + form))
    if u.fragment:
        errs.append(FieldError.invalid(field, u.fragment, "fragments are not permitted in the URL"))
    if u.query:
        errs.append(FieldError.invalid(field, u.query, "query parameters are not permitted in the URL"))
    return errs


def _stored_versions_errors(crd: Obj) -> list[FieldError]:
    stored = _l(_d(crd.get("status")).get("storedVersions"))
    field = "status.storedVersions"
    if not stored:
        return [_invalid_raw(field, encode_go_json(stored or None).decode(), "must have at least one stored version")]
    errs: list[FieldError] = []
    names = {_s(_d(v).get("name")) for v in _l(_d(crd.get("spec")).get("versions"))}
    for v in _l(_d(crd.get("spec")).get("versions")):
        if _d(v).get("storage") and v.get("name") not in stored:
            errs.append(FieldError.invalid(field, stored, "must have the storage version " + _s(v.get("name"))))
    for i, v in enumerate(stored):
        if v not in names:
            errs.append(FieldError.invalid(f"{field}[{i}]", v, f"missing from spec.versions; {v} was previously a "
                        f"storage version, and must remain in spec.versions until a storage migration ensures no "
                        f"data remains persisted in {v} and removes {v} from status.storedVersions"))
    return errs


def _approval_state(annotations: Any) -> tuple[str, str]:
    value = _s(_d(annotations).get(APPROVAL_ANNOTATION))
    key = f'"{APPROVAL_ANNOTATION}"'
    if not value:
        return "missing", f"protected groups must have approval annotation {key}, see {_APPROVAL_PR}"
    if value.startswith("unapproved"):
        return "bypassed", ""
    u = urlsplit(value)
    if u.scheme and u.netloc:
        return "approved", ""
    return "invalid", (f'protected groups must have approval annotation {key} with either a URL or a reason '
                       f'starting with "unapproved", see {_APPROVAL_PR}')


def _approval_errors(new: Obj, old: Mapping[str, Any] | None) -> list[FieldError]:
    group = _s(_d(new.get("spec")).get("group"))
    if not (group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))):
        return []
    state, reason = _approval_state(_d(new.get("metadata")).get("annotations"))
    if old is not None and _approval_state(_d(old.get("metadata")).get("annotations"))[0] == state:
        return []
    field = f"metadata.annotations[{APPROVAL_ANNOTATION}]"
    if state == "missing":
        return [FieldError.required(field, reason)]
    if state == "invalid":
        return [FieldError.invalid(field, _d(_d(new.get("metadata")).get("annotations")).get(APPROVAL_ANNOTATION), reason)]
    return []


def _preserve_unknown_errors(new: Obj, old: Mapping[str, Any] | None) -> list[FieldError]:
    if old is not None and _d(old.get("spec")).get("preserveUnknownFields") is True:
        return []
    if _d(new.get("spec")).get("preserveUnknownFields") is True:
        return [FieldError.invalid("spec.preserveUnknownFields", True, "cannot set to true, set "
                                   "x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead")]
    return []


def name_errors(crd: Obj) -> list[FieldError]:
    """metadata.name: a DNS subdomain that is spec.names.plural + "." + spec.group."""
    name = _s(_d(crd.get("metadata")).get("name"))
    if not name:
        return []
    spec = _d(crd.get("spec"))
    msgs = name_is_dns_subdomain(name, False)
    if name != f"{_s(_d(spec.get('names')).get('plural'))}.{_s(spec.get('group'))}":
        msgs = msgs + ['must be spec.names.plural+"."+spec.group']
    return [FieldError.invalid("metadata.name", name, m) for m in msgs]


def validate_create(crd: Obj) -> list[FieldError]:
    """ValidateCustomResourceDefinition without the ObjectMeta rules (the generic create checks
    them); ``crd`` is defaulted and prepared (status.storedVersions set)."""
    spec = _d(crd.get("spec"))
    errs = _spec_errors(spec)
    errs += names_errors(_d(crd.get("status")).get("acceptedNames"), "status.acceptedNames")
    errs += _stored_versions_errors(crd)
    errs += _approval_errors(crd, None)
    errs += _preserve_unknown_errors(crd, None)
    return errs


def _immutable(field: str, new: Any, old: Any) -> list[FieldError]:
    return [] if new == old else [FieldError.invalid(field, "" if new is None else new, "field is immutable")]


def validate_update(new: Obj, old: Mapping[str, Any]) -> list[FieldError]:
    spec, old_spec = _d(new.get("spec")), _d(old.get("spec"))
    errs = _spec_errors(spec)
    names, old_names = _d(spec.get("names")), _d(old_spec.get("names"))
    if condition_true(old, "Established"):
        errs += _immutable("spec.scope", spec.get("scope"), old_spec.get("scope"))
        errs += _immutable("spec.names.kind", names.get("kind"), old_names.get("kind"))
    errs += _immutable("spec.group", spec.get("group"), old_spec.get("group"))
    errs += _immutable("spec.names.plural", names.get("plural"), old_names.get("plural"))
    errs += names_errors(_d(new.get("status")).get("acceptedNames"), "status.acceptedNames")
    errs += _stored_versions_errors(new)
    errs += _approval_errors(new, old)
    errs += _preserve_unknown_errors(new, old)
    return errs


def validate_status_update(new: Obj) -> list[FieldError]:
    return names_errors(_d(new.get("status")).get("acceptedNames"), "status.acceptedNames")
