"""`/openapi/v2` as protobuf: a Swagger 2.0 JSON document encoded as gnostic's `openapi.v2.Document`.

Upstream's handler parses its JSON document with gnostic (github.com/google/gnostic-models,
openapiv2/OpenAPIv2.proto) and marshals the result; client-go's `OpenAPISchema()` (Helm's manifest
validation, `kubectl explain --output=plaintext-openapiv2`) unmarshals it. This module writes the same
message straight from the JSON-shaped document, driven by the table `MESSAGES` below.

How gnostic maps JSON onto its messages, and so what the table encodes:
- A message is a JSON object; each known key is one field. Keys the message lacks are dropped
  (gnostic would reject them; CRD schemas may carry OpenAPI v3 keys such as `nullable`).
- Free-form values (`default`, `example`, `enum` items, every vendor extension) are `Any{yaml}`. The
  YAML is the value written as JSON, which is YAML too (upstream writes block-style YAML; any YAML
  reader, such as kube-openapi's `VendorExtensionToMap`, reads both the same).
- Maps are repeated `NamedX{name = 1, value = 2}` fields selected by a key pattern: `x-` for vendor
  extensions, `/` for paths, `*` for everything else (definitions, properties, response codes).
- Some JSON values have several shapes, each a wrapper message (`ADAPTERS`): `type` (string or list)
  is `TypeItem{value}`, `items` (schema or list) is `ItemsItem{schema}`, `additionalProperties`
  (schema or bool) is a oneof, parameters/responses are a `$ref` or the real thing, a non-body
  parameter is chosen by its `in`, and a response schema that fits gnostic's `FileSchema` is one.

Wire rules as proto3 and Go's marshaller: fields in number order; a scalar equal to its default is
left out unless it is a oneof member (`additionalProperties: false` is sent); a message field is sent
whenever its key is present, even empty; repeated strings are never packed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from operator import itemgetter
from typing import Any, NamedTuple

import msgspec

__all__ = ["MESSAGES", "encode_document"]

VARINT, FIXED64, LEN = 0, 1, 2
_MASK64 = (1 << 64) - 1
_DOUBLE = struct.Struct("<d")

# Kinds: s string, b bool, i int64, d double, a Any, or a message name. Prefix `*`: repeated (a JSON
# list); prefix `=`: named pairs (`NamedX` with X the rest) for every JSON key matching the pattern;
# suffix `!`: oneof member, sent even when it equals the default.
_CHECKS = ("type:s format:s items:PrimitivesItems collectionFormat:s default:a maximum:d exclusiveMaximum:b "
           "minimum:d exclusiveMinimum:b maxLength:i minLength:i pattern:s maxItems:i minItems:i "
           "uniqueItems:b enum:*a multipleOf:d")
_PARAM = "required:b in:s description:s name:s"
_FORM_PARAM = f"{_PARAM} allowEmptyValue:b {_CHECKS} x-:=a"
_OTHER_PARAM = f"{_PARAM} {_CHECKS} x-:=a"

# One entry per message of OpenAPIv2.proto that a document can reach: its fields in field-number
# order (the .proto numbers every message's fields 1..n in declaration order), as `jsonKey:kind`.
MESSAGES: dict[str, str] = {
    "Document": "swagger:s info:Info host:s basePath:s schemes:*s consumes:*s produces:*s paths:Paths "
                "definitions:Definitions parameters:ParameterDefinitions responses:ResponseDefinitions "
                "security:*SecurityRequirement securityDefinitions:SecurityDefinitions tags:*Tag "
                "externalDocs:ExternalDocs x-:=a",
    "Info": "title:s version:s description:s termsOfService:s contact:Contact license:License x-:=a",
    "Contact": "name:s url:s email:s x-:=a",
    "License": "name:s url:s x-:=a",
    "ExternalDocs": "description:s url:s x-:=a",
    "Tag": "name:s description:s externalDocs:ExternalDocs x-:=a",
    "Paths": "x-:=a /:=PathItem",
    "PathItem": "$ref:s get:Operation put:Operation post:Operation delete:Operation options:Operation "
                "head:Operation patch:Operation parameters:*ParametersItem x-:=a",
    "Operation": "tags:*s summary:s description:s externalDocs:ExternalDocs operationId:s produces:*s "
                 "consumes:*s parameters:*ParametersItem responses:Responses schemes:*s deprecated:b "
                 "security:*SecurityRequirement x-:=a",
    "ParametersItem": "parameter:Parameter jsonReference:JsonReference",
    "Parameter": "body:BodyParameter nonBody:NonBodyParameter",
    "BodyParameter": "description:s name:s in:s required:b schema:Schema x-:=a",
    "NonBodyParameter": "header:HeaderParameterSubSchema formData:FormDataParameterSubSchema "
                        "query:QueryParameterSubSchema path:PathParameterSubSchema",
    "HeaderParameterSubSchema": _OTHER_PARAM,
    "FormDataParameterSubSchema": _FORM_PARAM,
    "QueryParameterSubSchema": _FORM_PARAM,
    "PathParameterSubSchema": _OTHER_PARAM,
    "PrimitivesItems": f"{_CHECKS} x-:=a",
    "Header": f"{_CHECKS} description:s x-:=a",
    "Headers": "*:=Header",
    "Examples": "*:=a",
    "JsonReference": "$ref:s description:s",
    "Responses": "*:=ResponseValue x-:=a",
    "ResponseValue": "response:Response jsonReference:JsonReference",
    "Response": "description:s schema:SchemaItem headers:Headers examples:Examples x-:=a",
    "SchemaItem": "schema:Schema fileSchema:FileSchema",
    "FileSchema": "format:s title:s description:s default:a required:*s type:s readOnly:b "
                  "externalDocs:ExternalDocs example:a x-:=a",
    "Schema": "$ref:s format:s title:s description:s default:a multipleOf:d maximum:d exclusiveMaximum:b "
              "minimum:d exclusiveMinimum:b maxLength:i minLength:i pattern:s maxItems:i minItems:i "
              "uniqueItems:b maxProperties:i minProperties:i required:*s enum:*a "
              "additionalProperties:AdditionalPropertiesItem type:TypeItem items:ItemsItem allOf:*Schema "
              "properties:Properties discriminator:s readOnly:b xml:Xml externalDocs:ExternalDocs "
              "example:a x-:=a",
    "AdditionalPropertiesItem": "schema:Schema boolean:b!",
    "TypeItem": "value:*s",
    "ItemsItem": "schema:*Schema",
    "Properties": "*:=Schema",
    "Xml": "name:s namespace:s prefix:s attribute:b wrapped:b x-:=a",
    "Definitions": "*:=Schema",
    "ParameterDefinitions": "*:=Parameter",
    "ResponseDefinitions": "*:=Response",
    "SecurityDefinitions": "*:=SecurityDefinitionsItem",
    "SecurityDefinitionsItem": "basic:BasicAuthenticationSecurity apiKey:ApiKeySecurity "
                               "implicit:Oauth2ImplicitSecurity password:Oauth2PasswordSecurity "
                               "application:Oauth2ApplicationSecurity accessCode:Oauth2AccessCodeSecurity",
    "BasicAuthenticationSecurity": "type:s description:s x-:=a",
    "ApiKeySecurity": "type:s name:s in:s description:s x-:=a",
    "Oauth2ImplicitSecurity": "type:s flow:s scopes:Oauth2Scopes authorizationUrl:s description:s x-:=a",
    "Oauth2PasswordSecurity": "type:s flow:s scopes:Oauth2Scopes tokenUrl:s description:s x-:=a",
    "Oauth2ApplicationSecurity": "type:s flow:s scopes:Oauth2Scopes tokenUrl:s description:s x-:=a",
    "Oauth2AccessCodeSecurity": "type:s flow:s scopes:Oauth2Scopes authorizationUrl:s tokenUrl:s "
                                "description:s x-:=a",
    "Oauth2Scopes": "*:=s",
    "SecurityRequirement": "*:=StringArray",
    "StringArray": "value:*s",
}

_FILE_SCHEMA_KEYS = frozenset(("default", "description", "example", "externalDocs", "format", "readOnly",
                               "required", "title", "type"))


def _file_schema(v: dict[str, Any]) -> bool:
    """gnostic tries `Schema` then `FileSchema` and keeps the last that parses: a schema with a string
    `type` and only FileSchema's keys becomes a FileSchema (as `{"type": "object"}` does upstream)."""
    return isinstance(v.get("type"), str) and all(k in _FILE_SCHEMA_KEYS or k.startswith("x-") for k in v)


def _security(v: dict[str, Any]) -> str:
    return str(v.get("flow", "")) if v.get("type") == "oauth2" else str(v.get("type", ""))


def _pick(choose: Callable[[dict[str, Any]], str]) -> Callable[[Any], dict[str, Any] | None]:
    """An adapter for a oneof of objects: the value under the member label `choose` names."""
    return lambda v: {choose(v): v} if isinstance(v, dict) else None


# JSON value -> the object the wrapper message's table reads (None: the value has no valid shape).
ADAPTERS: dict[str, Callable[[Any], dict[str, Any] | None]] = {
    "TypeItem": lambda v: {"value": v if isinstance(v, list) else [v]},
    "ItemsItem": lambda v: {"schema": v if isinstance(v, list) else [v]},
    "StringArray": lambda v: {"value": v},
    "AdditionalPropertiesItem": lambda v: {"boolean": v} if isinstance(v, bool) else {"schema": v},
    "ParametersItem": _pick(lambda v: "jsonReference" if "$ref" in v else "parameter"),
    "ResponseValue": _pick(lambda v: "jsonReference" if "$ref" in v else "response"),
    "Parameter": _pick(lambda v: "body" if v.get("in") == "body" else "nonBody"),
    "NonBodyParameter": _pick(lambda v: str(v.get("in", ""))),
    "SchemaItem": _pick(lambda v: "fileSchema" if _file_schema(v) else "schema"),
    "SecurityDefinitionsItem": _pick(_security),
}


class Field(NamedTuple):
    number: int
    kind: str  # s, b, i, d, a or a message name
    repeated: bool
    named: bool  # a pattern field: NamedX pairs
    always: bool  # oneof member: sent even when default
    key: bytes  # the encoded tag


class Table(NamedTuple):
    exact: dict[str, Field]
    patterns: list[tuple[str, Field]]  # checked in this order: "x-", "/", "*"


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _wire(kind: str) -> int:
    return {"b": VARINT, "i": VARINT, "d": FIXED64}.get(kind, LEN)


def _table(spec: str) -> Table:
    exact: dict[str, Field] = {}
    patterns: list[tuple[str, Field]] = []
    for number, item in enumerate(spec.split(), 1):
        name, _, kind = item.partition(":")
        repeated, named, always = kind.startswith("*"), kind.startswith("="), kind.endswith("!")
        kind = kind.strip("*=!")
        f = Field(number, kind, repeated, named, always, _tag(number, LEN if named else _wire(kind)))
        if name in ("x-", "/", "*"):
            patterns.append((name, f))
        else:
            exact[name] = f
    patterns.sort(key=lambda p: ("x-", "/", "*").index(p[0]))
    return Table(exact, patterns)


_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))


def _varint(n: int) -> bytes:
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    n &= _MASK64
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len(payload: bytes) -> bytes:
    return _varint(len(payload)) + payload


def _text(s: str) -> bytes:
    return s.encode("utf-8", "replace")


def _any(v: Any) -> bytes:
    """`Any{yaml = 2}` holding the value as JSON text (a YAML document)."""
    return b"\x12" + _len(msgspec.json.encode(v) + b"\n")


def _value(kind: str, v: Any, *, always: bool) -> bytes | None:
    """One value's payload (without its tag); None when it is left out."""
    if kind == "s":
        return _len(_text(v)) if isinstance(v, str) and (v or always) else None
    if kind == "b":
        return (b"\x01" if v else b"\x00") if isinstance(v, bool) and (v or always) else None
    if kind == "i":
        return _varint(v) if isinstance(v, int) and not isinstance(v, bool) and (v or always) else None
    if kind == "d":
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        return _DOUBLE.pack(float(v)) if ok and (v or always) else None
    body = _any(v) if kind == "a" else _message(kind, v)
    return None if body is None else _len(body)


def _message(name: str, obj: Any) -> bytes | None:
    """The message `name` built from a JSON value; None when the value cannot be one."""
    adapt = ADAPTERS.get(name)
    if adapt is not None:
        obj = adapt(obj)
    if not isinstance(obj, dict):
        return None
    table = TABLES[name]
    parts: list[tuple[int, bytes]] = []
    for key, v in obj.items():
        f = table.exact.get(key) or _pattern(table, key)
        if f is None:
            continue
        if f.named:  # NamedX{name = 1, value = 2}
            value = _value(f.kind, v, always=False)
            pair = b"\x0a" + _len(_text(key)) + (b"" if value is None else b"\x12" + value)
            parts.append((f.number, f.key + _len(pair)))
        elif f.repeated:
            if isinstance(v, list):
                parts.extend((f.number, f.key + item) for item in
                             (_value(f.kind, x, always=True) for x in v) if item is not None)
        else:
            value = _value(f.kind, v, always=f.always)
            if value is not None:
                parts.append((f.number, f.key + value))
    if any(parts[i][0] > parts[i + 1][0] for i in range(len(parts) - 1)):
        parts.sort(key=itemgetter(0))  # stable: repeated fields keep their order
    return b"".join([p for _, p in parts])


def _pattern(table: Table, key: str) -> Field | None:
    for prefix, f in table.patterns:
        if prefix == "*" or key.startswith(prefix):
            return f
    return None


TABLES: dict[str, Table] = {name: _table(spec) for name, spec in MESSAGES.items()}


def encode_document(doc: dict[str, Any]) -> bytes:
    """The Swagger 2.0 document `doc` (JSON-shaped) as an `openapi.v2.Document` message."""
    out = _message("Document", doc)
    assert out is not None
    return out
