"""Validation of a CRD's OpenAPI v3 schema: is it allowed, is it structural, are its defaults valid.

Ports apis/apiextensions/validation (ValidateCustomResourceDefinitionOpenAPISchema and the v3
standard validator), apiserver/schema (ValidateStructural: invariants and completeness) and
apiserver/schema/defaulting (ValidateDefaults) for a v1 CRD. ``validate_schema(schema, path)``
returns upstream's field errors in upstream's order: root rules for the status subresource,
the structural errors (sorted by their text, as upstream sorts them), or else the default
errors, then the OpenAPI rules. ``path`` is where the schema's holder sits, e.g.
``spec.validation`` (one schema for every version) or ``spec.versions[1].schema``.
"""

from __future__ import annotations

import re
from typing import Any

from kubecore.api import pruning, structural
from kubecore.api.errors import FieldError, encode_go_json

__all__ = ["validate_schema", "OPENAPI_TYPES"]

Schema = dict[str, Any]
OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_META = ("metadata", "kind", "apiVersion")
_ROOT_ALLOWED_GO = ["Description", "Type", "Format", "Title", "Maximum", "ExclusiveMaximum", "Minimum",
                    "ExclusiveMinimum", "MaxLength", "MinLength", "Pattern", "MaxItems", "MinItems", "UniqueItems",
                    "MultipleOf", "Required", "Items", "Properties", "ExternalDocs", "Example",
                    "XPreserveUnknownFields", "XValidations"]
_ROOT_ALLOWED_JSON = frozenset({
    "description", "type", "format", "title", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "multipleOf", "required", "items",
    "properties", "externalDocs", "example", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations",
})
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


def _zero(v: Any) -> bool:
    return v is None or v is False or v == "" or v == 0 and not isinstance(v, bool) or v == [] or v == {}


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _key(path: str, name: str, key: str) -> str:
    return f"{_child(path, name)}[{key}]"


def _json(v: Any) -> Any:
    return encode_go_json(v).decode()


def _dicts(v: Any) -> dict[str, Schema]:
    return {k: s for k, s in v.items() if isinstance(s, dict)} if isinstance(v, dict) else {}


# ---- structural invariants ---------------------------------------------------------------------

class _Structural:
    def __init__(self) -> None:
        self.errs: list[FieldError] = []

    def invariants(self, s: Schema, lvl: str, path: str) -> None:
        typ = s.get("type") or ""
        if typ == "array" and "items" not in s:
            self.errs.append(FieldError.required(_child(path, "items"), "must be specified"))
        if isinstance(s.get("items"), dict):
            self.invariants(s["items"], "item", _child(path, "items"))
        for k, sub in _dicts(s.get("properties")).items():
            self.invariants(sub, "field", _key(path, "properties", k))
        if "additionalProperties" in s:
            if lvl == "root":
                self.errs.append(FieldError.forbidden(_child(path, "additionalProperties"), "must not be used at the root"))
            if isinstance(s["additionalProperties"], dict):
                self.invariants(s["additionalProperties"], "field", _child(path, "additionalProperties"))
        self.extensions(s, path)
        skip_any = s.get("anyOf") == _INT_OR_STRING_ANY_OF
        all_of = s.get("allOf") or []
        skip_first = bool(all_of) and isinstance(all_of[0], dict) and all_of[0].get("anyOf") == _INT_OR_STRING_ANY_OF
        self.value_validation(s, path, skip_any=skip_any, skip_first_all_of_any=skip_first)
        self.types(s, lvl, path)

    def extensions(self, s: Schema, path: str) -> None:
        if s.get("x-kubernetes-int-or-string") and s.get("x-kubernetes-preserve-unknown-fields"):
            self.errs.append(FieldError.invalid(_child(path, "x-kubernetes-preserve-unknown-fields"), True,
                                                "must be false if x-kubernetes-int-or-string is true"))
        if s.get("x-kubernetes-int-or-string") and s.get("x-kubernetes-embedded-resource"):
            self.errs.append(FieldError.invalid(_child(path, "x-kubernetes-embedded-resource"), True,
                                                "must be false if x-kubernetes-int-or-string is true"))

    def types(self, s: Schema, lvl: str, path: str) -> None:
        typ = s.get("type") or ""
        embedded = bool(s.get("x-kubernetes-embedded-resource"))
        tpath = _child(path, "type")
        if embedded and typ != "object":
            msg = "must be object if x-kubernetes-embedded-resource is true"
            self.errs.append(FieldError.required(tpath, msg) if not typ else FieldError.invalid(tpath, typ, msg))
        elif not typ and not s.get("x-kubernetes-int-or-string") and not s.get("x-kubernetes-preserve-unknown-fields"):
            where = {"root": "at the root", "item": "for specified array items", "field": "for specified object fields"}
            self.errs.append(FieldError.required(tpath, f"must not be empty {where[lvl]}"))
        if embedded and "additionalProperties" in s:
            self.errs.append(FieldError.forbidden(_child(path, "additionalProperties"),
                                                  "must not be used if x-kubernetes-embedded-resource is set"))
        if lvl == "root" and typ and typ != "object":
            self.errs.append(FieldError.invalid(tpath, typ, "must be object at the root"))
        check_meta = lvl == "root" or embedded
        props = _dicts(s.get("properties"))
        for name in ("kind", "apiVersion"):
            if name in props and check_meta and props[name].get("type", "") != "string":
                self.errs.append(FieldError.invalid(_child(_key(path, "properties", name), "type"),
                                                    props[name].get("type", ""), "must be string"))
        if "metadata" in props:
            self.metadata(props["metadata"], check_meta, lvl, _key(path, "properties", "metadata"))
        if embedded and not s.get("x-kubernetes-preserve-unknown-fields") and not props:
            self.errs.append(FieldError.required(_child(path, "properties"), "must not be empty if "
                             "x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))

    def metadata(self, m: Schema, check_meta: bool, lvl: str, path: str) -> None:
        if check_meta and m.get("type", "") != "object":
            self.errs.append(FieldError.invalid(_child(path, "type"), m.get("type", ""), "must be object"))
        if lvl != "root":
            return
        rest = {k: v for k, v in m.items() if k not in ("type", "default") and not _zero(v)}
        props = rest.get("properties")
        if isinstance(props, dict) and set(props) <= {"name", "generateName"}:
            rest.pop("properties")
        if rest:
            self.errs.append(FieldError.forbidden(path, "must not specify anything other than name and "
                                                  "generateName, but metadata is implicitly specified"))

    def value_validation(self, s: Schema, path: str, *, skip_any: bool, skip_first_all_of_any: bool) -> None:
        if not skip_any:
            for i, sub in enumerate(s.get("anyOf") or []):
                self.nested(sub, f"{_child(path, 'anyOf')}[{i}]", skip_any=False)
        for i, sub in enumerate(s.get("allOf") or []):
            self.nested(sub, f"{_child(path, 'allOf')}[{i}]", skip_any=skip_first_all_of_any and i == 0)
        for i, sub in enumerate(s.get("oneOf") or []):
            self.nested(sub, f"{_child(path, 'oneOf')}[{i}]", skip_any=False)
        if isinstance(s.get("not"), dict):
            self.nested(s["not"], _child(path, "not"), skip_any=False)
        pattern = s.get("pattern")
        if isinstance(pattern, str) and pattern:
            try:
                re.compile(pattern)
            except re.error as e:
                self.errs.append(FieldError.invalid(_child(path, "pattern"), pattern,
                                                    f"must be a valid regular expression, but isn't: {e}"))

    _FORBIDDEN = (
        ("type", "must be empty to be structural"), ("default", "must be undefined to be structural"),
        ("title", "must be empty to be structural"), ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
        ("x-kubernetes-embedded-resource", "must be false to be structural"),
        ("x-kubernetes-int-or-string", "must be false to be structural"),
        ("x-kubernetes-list-map-keys", "must be empty to be structural"),
        ("x-kubernetes-list-type", "must be undefined to be structural"),
        ("x-kubernetes-map-type", "must be undefined to be structural"),
        ("x-kubernetes-validations", "must be empty to be structural"),
    )

    def nested(self, v: Any, path: str, *, skip_any: bool) -> None:
        if not isinstance(v, dict):
            return
        self.value_validation(v, path, skip_any=skip_any, skip_first_all_of_any=False)
        if isinstance(v.get("items"), dict):
            self.nested(v["items"], _child(path, "items"), skip_any=False)
        for k, sub in _dicts(v.get("properties")).items():
            self.nested(sub, _key(path, "properties", k), skip_any=False)
        if "additionalProperties" in v:
            self.errs.append(FieldError.forbidden(_child(path, "additionalProperties"), "must be undefined to be structural"))
        for key, msg in self._FORBIDDEN:
            if key in v and not _zero(v[key]) or key == "default" and "default" in v and v["default"] is not None:
                self.errs.append(FieldError.forbidden(_child(path, key), msg))
        if "metadata" in _dicts(v.get("properties")):
            self.errs.append(FieldError.forbidden(_key(path, "properties", "metadata"), "must not be specified in a nested context"))

    def completeness(self, v: Any, s: Schema | None, s_path: str, v_path: str) -> None:
        """Every property or items a value validation talks about exists in the structure."""
        if not isinstance(v, dict):
            return
        for key in ("allOf", "anyOf", "oneOf"):
            for i, sub in enumerate(v.get(key) or []):
                self.nested_complete(sub, s, s_path, f"{_child(v_path, key)}[{i}]")
        if isinstance(v.get("not"), dict):
            self.nested_complete(v["not"], s, s_path, _child(v_path, "not"))

    def nested_complete(self, v: Any, s: Schema | None, s_path: str, v_path: str) -> None:
        if not isinstance(v, dict):
            return
        if s is None:
            self.errs.append(FieldError.required(s_path, f"because it is defined in {v_path}"))
            return
        self.completeness(v, s, s_path, v_path)
        if isinstance(v.get("items"), dict):
            items = s.get("items") if isinstance(s.get("items"), dict) else None
            self.nested_complete(v["items"], items, _child(s_path, "items"), _child(v_path, "items"))
        s_props = _dicts(s.get("properties"))
        for k, sub in _dicts(v.get("properties")).items():
            if k not in s_props:
                self.errs.append(FieldError.required(_key(s_path, "properties", k),
                                                     f"because it is defined in {_key(v_path, 'properties', k)}"))
            else:
                self.nested_complete(sub, s_props[k], _key(s_path, "properties", k), _key(v_path, "properties", k))


def _structural_errors(schema: Schema, path: str) -> list[FieldError]:
    st = _Structural()
    st.invariants(schema, "root", path)
    st.completeness(schema, schema, path, path)
    return sorted(st.errs, key=lambda e: e.error())


# ---- defaults ------------------------------------------------------------------------------------

def _default_errors(s: Schema, path: str, *, inside_meta: bool = False, root: bool = True) -> list[FieldError]:
    errs: list[FieldError] = []
    embedded = root or bool(s.get("x-kubernetes-embedded-resource"))
    if "default" in s and s["default"] is not None and not inside_meta:
        dpath = _child(path, "default")
        value = s["default"]
        pruned = _deepcopy_json(value)
        pruning.prune(pruned, s, root=bool(s.get("x-kubernetes-embedded-resource")))
        if pruned != value:
            errs.append(FieldError.invalid(dpath, value, "must not have unknown fields"))
        errs.extend(pruning.validate_embedded(value, s, dpath) if s.get("x-kubernetes-embedded-resource") else [])
        if not errs:
            errs.extend(structural.validate(value, s, prefix=dpath))
    if isinstance(s.get("items"), dict):
        errs.extend(_default_errors(s["items"], _child(path, "items"), inside_meta=inside_meta, root=False))
    for k, sub in _dicts(s.get("properties")).items():
        meta = inside_meta or (embedded and k in _META)
        errs.extend(_default_errors(sub, _key(path, "properties", k), inside_meta=meta, root=False))
    if isinstance(s.get("additionalProperties"), dict):
        errs.extend(_default_errors(s["additionalProperties"], _child(path, "additionalProperties"),
                                    inside_meta=inside_meta, root=False))
    return errs


def _deepcopy_json(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _deepcopy_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_deepcopy_json(x) for x in v]
    return v


# ---- OpenAPI v3 rules (specStandardValidatorV3 and ValidateCustomResourceDefinitionOpenAPISchema) ----

class _OpenAPI:
    def __init__(self) -> None:
        self.errs: list[FieldError] = []

    def standard(self, s: Schema, path: str, *, defaults_forbidden: str, inside_meta: bool) -> None:
        typ = s.get("type")
        if isinstance(typ, str) and typ and typ not in OPENAPI_TYPES:
            self.errs.append(FieldError.not_supported(_child(path, "type"), typ, list(OPENAPI_TYPES)))
        if "default" in s and s["default"] is not None and defaults_forbidden:
            self.errs.append(FieldError.forbidden(_child(path, "default"), "must not be set " + defaults_forbidden))
        for key, msg in (("id", "id is not supported"), ("additionalItems", "additionalItems is not supported"),
                         ("patternProperties", "patternProperties is not supported"),
                         ("definitions", "definitions is not supported"),
                         ("dependencies", "dependencies is not supported"), ("$ref", "$ref is not supported")):
            if key in s and not _zero(s[key]):
                self.errs.append(FieldError.forbidden(_child(path, key), msg))
        if typ == "null":
            self.errs.append(FieldError.forbidden(_child(path, "type"), "type cannot be set to null, use nullable as an alternative"))
        if isinstance(s.get("items"), list):
            self.errs.append(FieldError.forbidden(_child(path, "items"), "items must be a schema object and not an array"))
        if inside_meta and s.get("x-kubernetes-embedded-resource"):
            self.errs.append(FieldError.forbidden(_child(path, "x-kubernetes-embedded-resource"),
                                                  "must not be used inside of resource meta"))

    def walk(self, s: Any, path: str, *, root: bool = False, defaults_forbidden: str = "",
             inside_meta: bool = False) -> None:
        if not isinstance(s, dict):
            return
        self.standard(s, path, defaults_forbidden=defaults_forbidden, inside_meta=inside_meta)
        if s.get("uniqueItems") is True:
            self.errs.append(FieldError.forbidden(_child(path, "uniqueItems"),
                                                  "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
        props = _dicts(s.get("properties"))
        ap = s.get("additionalProperties")
        if "additionalProperties" in s and ap is not None:
            if props and (ap is False or isinstance(ap, dict)):
                self.errs.append(FieldError.forbidden(_child(path, "additionalProperties"),
                                                      "additionalProperties and properties are mutual exclusive"))
            sub_forbid = "inside additionalProperties applying to object metadata" if inside_meta else defaults_forbidden
            self.walk(ap, _child(path, "additionalProperties"), defaults_forbidden=sub_forbid, inside_meta=inside_meta)
        for k, sub in props.items():
            meta, forbid = inside_meta, defaults_forbidden
            if (root or s.get("x-kubernetes-embedded-resource")) and k in _META:
                meta = True
                if root:
                    forbid = f"in top-level {k}"
            self.walk(sub, _key(path, "properties", k), defaults_forbidden=forbid, inside_meta=meta)
        self.walk(s.get("not"), _child(path, "not"), defaults_forbidden=defaults_forbidden, inside_meta=inside_meta)
        for key in ("allOf", "oneOf", "anyOf"):
            for i, sub in enumerate(s.get(key) or []):
                self.walk(sub, f"{_child(path, key)}[{i}]", defaults_forbidden=defaults_forbidden, inside_meta=inside_meta)
        if isinstance(s.get("items"), dict):
            self.walk(s["items"], _child(path, "items"), defaults_forbidden=defaults_forbidden, inside_meta=inside_meta)
        self.extensions(s, path)

    def extensions(self, s: Schema, path: str) -> None:
        typ = s.get("type") or ""
        if s.get("x-kubernetes-preserve-unknown-fields") is False:
            self.errs.append(FieldError.invalid(_child(path, "x-kubernetes-preserve-unknown-fields"), False,
                                                "must be true or undefined"))
        map_type, list_type = s.get("x-kubernetes-map-type"), s.get("x-kubernetes-list-type")
        if map_type is not None and typ != "object":
            msg = "must be object if x-kubernetes-map-type is specified"
            self.errs.append(FieldError.required(_child(path, "type"), msg) if not typ
                             else FieldError.invalid(_child(path, "type"), typ, msg))
        if map_type is not None and map_type not in ("atomic", "granular"):
            self.errs.append(FieldError.not_supported(_child(path, "x-kubernetes-map-type"), map_type, ["atomic", "granular"]))
        if list_type is not None and typ != "array":
            msg = "must be array if x-kubernetes-list-type is specified"
            self.errs.append(FieldError.required(_child(path, "type"), msg) if not typ
                             else FieldError.invalid(_child(path, "type"), typ, msg))
        if list_type is not None and list_type not in ("atomic", "set", "map"):
            self.errs.append(FieldError.not_supported(_child(path, "x-kubernetes-list-type"), list_type,
                                                      ["atomic", "set", "map"]))
        keys = s.get("x-kubernetes-list-map-keys") or []
        if keys and list_type is None:
            self.errs.append(FieldError.required(_child(path, "x-kubernetes-list-type"),
                                                 "must be map if x-kubernetes-list-map-keys is non-empty"))
        elif keys and list_type != "map":
            self.errs.append(FieldError.invalid(_child(path, "x-kubernetes-list-type"), list_type,
                                                "must be map if x-kubernetes-list-map-keys is non-empty"))
        if list_type == "map":
            self.list_map(s, path, keys)

    def list_map(self, s: Schema, path: str, keys: list[Any]) -> None:
        if not keys:
            self.errs.append(FieldError.required(_child(path, "x-kubernetes-list-map-keys"),
                                                 "must not be empty if x-kubernetes-list-type is map"))
        items = s.get("items")
        if items is None:
            self.errs.append(FieldError.required(_child(path, "items"), "must have a schema if x-kubernetes-list-type is map"))
            return
        if not isinstance(items, dict):
            return
        if items.get("type") != "object":
            self.errs.append(FieldError.invalid(_child(_child(path, "items"), "type"), items.get("type", ""),
                                                "must be object if parent array's x-kubernetes-list-type is map"))
            return
        props = _dicts(items.get("properties"))
        required = set(items.get("required") or [])
        for k in keys:
            if k not in props:
                self.errs.append(FieldError.invalid(_child(path, "x-kubernetes-list-map-keys"), keys,
                                                    "entries must all be names of item properties"))
                continue
            kpath = _key(_child(path, "items"), "properties", k)
            if k not in required and "default" not in props[k]:
                self.errs.append(FieldError.required(_child(kpath, "default"), "this property is in "
                                 "x-kubernetes-list-map-keys, so it must have a default or be a required property"))


def _root_status_errors(schema: Schema, path: str) -> list[FieldError]:
    """With a status subresource only some keywords may sit at the root (status is extracted
    as properties.status and must keep its validation)."""
    spath = _child(path, "openAPIV3Schema")
    for key, value in schema.items():
        if _zero(value):
            continue
        if key == "type":
            if value != "object":
                return [FieldError.invalid(_child(spath, "type"), value, 'only "object" is allowed as the type at '
                                           "the root of the schema if the status subresource is enabled")]
            continue
        if key not in _ROOT_ALLOWED_JSON:
            allowed = "[" + " ".join(_ROOT_ALLOWED_GO) + "]"
            return [FieldError("FieldValueInvalid", spath, f"Invalid value: {_json(schema)}: only {allowed} fields "
                               "are allowed at the root of the schema if the status subresource is enabled")]
    return []


def validate_schema(schema: Schema, path: str, *, status_enabled: bool) -> list[FieldError]:
    """All errors of one ``openAPIV3Schema`` whose holder is at ``path`` (e.g. spec.validation)."""
    errs: list[FieldError] = []
    spath = _child(path, "openAPIV3Schema")
    if status_enabled:
        errs.extend(_root_status_errors(schema, path))
    if schema.get("nullable") is True:
        errs.append(FieldError.forbidden(_child(spath, "nullable"), "nullable cannot be true at the root"))
    structural_errs = _structural_errors(schema, spath)
    errs.extend(structural_errs or _default_errors(schema, spath))
    api = _OpenAPI()
    api.walk(schema, spath, root=True)
    errs.extend(api.errs)
    return errs
