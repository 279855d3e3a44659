"""/openapi/v2 as gnostic's protobuf `openapi.v2.Document`, checked with an independent decoder.

The decoder is the `protobuf` package (a test dependency through aetcd) with message classes built
at test time from `PROTO` below: a transcription of OpenAPIv2.proto (github.com/google/gnostic-models)
with every field number written out, independent of the encoder's positional table. Decoded
messages are turned back into JSON the way gnostic maps them and compared with the JSON document,
so a wrong field number, wire type or wrapper shape fails here.
"""

from __future__ import annotations

import re
from email.utils import formatdate
from typing import Any

import msgspec
import pytest
import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from kubecore.api.registry import ResourceType, builtin_registry
from kubecore.apiserver import openapi, openapi_proto

PB = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

# `message Name [oneof]: type name = number; ...` (repeated as `*type`; Any.value, a
# google.protobuf.Any that is never sent, as bytes).
PROTO = """
AdditionalPropertiesItem oneof: Schema schema=1; bool boolean=2
Any: bytes value=1; string yaml=2
ApiKeySecurity: string type=1; string name=2; string in=3; string description=4; *NamedAny vendor_extension=5
BasicAuthenticationSecurity: string type=1; string description=2; *NamedAny vendor_extension=3
BodyParameter: string description=1; string name=2; string in=3; bool required=4; Schema schema=5;
  *NamedAny vendor_extension=6
Contact: string name=1; string url=2; string email=3; *NamedAny vendor_extension=4
Definitions: *NamedSchema additional_properties=1
Document: string swagger=1; Info info=2; string host=3; string base_path=4; *string schemes=5;
  *string consumes=6; *string produces=7; Paths paths=8; Definitions definitions=9;
  ParameterDefinitions parameters=10; ResponseDefinitions responses=11; *SecurityRequirement security=12;
  SecurityDefinitions security_definitions=13; *Tag tags=14; ExternalDocs external_docs=15;
  *NamedAny vendor_extension=16
Examples: *NamedAny additional_properties=1
ExternalDocs: string description=1; string url=2; *NamedAny vendor_extension=3
FileSchema: string format=1; string title=2; string description=3; Any default=4; *string required=5;
  string type=6; bool read_only=7; ExternalDocs external_docs=8; Any example=9; *NamedAny vendor_extension=10
FormDataParameterSubSchema: bool required=1; string in=2; string description=3; string name=4;
  bool allow_empty_value=5; string type=6; string format=7; PrimitivesItems items=8;
  string collection_format=9; Any default=10; double maximum=11; bool exclusive_maximum=12;
  double minimum=13; bool exclusive_minimum=14; int64 max_length=15; int64 min_length=16;
  string pattern=17; int64 max_items=18; int64 min_items=19; bool unique_items=20; *Any enum=21;
  double multiple_of=22; *NamedAny vendor_extension=23
Header: string type=1; string format=2; PrimitivesItems items=3; string collection_format=4; Any default=5;
  double maximum=6; bool exclusive_maximum=7; double minimum=8; bool exclusive_minimum=9;
  int64 max_length=10; int64 min_length=11; string pattern=12; int64 max_items=13; int64 min_items=14;
  bool unique_items=15; *Any enum=16; double multiple_of=17; string description=18;
  *NamedAny vendor_extension=19
HeaderParameterSubSchema: bool required=1; string in=2; string description=3; string name=4;
  string type=5; string format=6; PrimitivesItems items=7; string collection_format=8; Any default=9;
  double maximum=10; bool exclusive_maximum=11; double minimum=12; bool exclusive_minimum=13;
  int64 max_length=14; int64 min_length=15; string pattern=16; int64 max_items=17; int64 min_items=18;
  bool unique_items=19; *Any enum=20; double multiple_of=21; *NamedAny vendor_extension=22
Headers: *NamedHeader additional_properties=1
Info: string title=1; string version=2; string description=3; string terms_of_service=4; Contact contact=5;
  License license=6; *NamedAny vendor_extension=7
ItemsItem: *Schema schema=1
JsonReference: string _ref=1; string description=2
License: string name=1; string url=2; *NamedAny vendor_extension=3
NamedAny: string name=1; Any value=2
NamedHeader: string name=1; Header value=2
NamedParameter: string name=1; Parameter value=2
NamedPathItem: string name=1; PathItem value=2
NamedResponse: string name=1; Response value=2
NamedResponseValue: string name=1; ResponseValue value=2
NamedSchema: string name=1; Schema value=2
NamedSecurityDefinitionsItem: string name=1; SecurityDefinitionsItem value=2
NamedString: string name=1; string value=2
NamedStringArray: string name=1; StringArray value=2
NonBodyParameter oneof: HeaderParameterSubSchema header_parameter_sub_schema=1;
  FormDataParameterSubSchema form_data_parameter_sub_schema=2;
  QueryParameterSubSchema query_parameter_sub_schema=3; PathParameterSubSchema path_parameter_sub_schema=4
Oauth2AccessCodeSecurity: string type=1; string flow=2; Oauth2Scopes scopes=3; string authorization_url=4;
  string token_url=5; string description=6; *NamedAny vendor_extension=7
Oauth2ApplicationSecurity: string type=1; string flow=2; Oauth2Scopes scopes=3; string token_url=4;
  string description=5; *NamedAny vendor_extension=6
Oauth2ImplicitSecurity: string type=1; string flow=2; Oauth2Scopes scopes=3; string authorization_url=4;
  string description=5; *NamedAny vendor_extension=6
Oauth2PasswordSecurity: string type=1; string flow=2; Oauth2Scopes scopes=3; string token_url=4;
  string description=5; *NamedAny vendor_extension=6
Oauth2Scopes: *NamedString additional_properties=1
Operation: *string tags=1; string summary=2; string description=3; ExternalDocs external_docs=4;
  string operation_id=5; *string produces=6; *string consumes=7; *ParametersItem parameters=8;
  Responses responses=9; *string schemes=10; bool deprecated=11; *SecurityRequirement security=12;
  *NamedAny vendor_extension=13
Parameter oneof: BodyParameter body_parameter=1; NonBodyParameter non_body_parameter=2
ParameterDefinitions: *NamedParameter additional_properties=1
ParametersItem oneof: Parameter parameter=1; JsonReference json_reference=2
PathItem: string _ref=1; Operation get=2; Operation put=3; Operation post=4; Operation delete=5;
  Operation options=6; Operation head=7; Operation patch=8; *ParametersItem parameters=9;
  *NamedAny vendor_extension=10
PathParameterSubSchema: bool required=1; string in=2; string description=3; string name=4; string type=5;
  string format=6; PrimitivesItems items=7; string collection_format=8; Any default=9; double maximum=10;
  bool exclusive_maximum=11; double minimum=12; bool exclusive_minimum=13; int64 max_length=14;
  int64 min_length=15; string pattern=16; int64 max_items=17; int64 min_items=18; bool unique_items=19;
  *Any enum=20; double multiple_of=21; *NamedAny vendor_extension=22
Paths: *NamedAny vendor_extension=1; *NamedPathItem path=2
PrimitivesItems: string type=1; string format=2; PrimitivesItems items=3; string collection_format=4;
  Any default=5; double maximum=6; bool exclusive_maximum=7; double minimum=8; bool exclusive_minimum=9;
  int64 max_length=10; int64 min_length=11; string pattern=12; int64 max_items=13; int64 min_items=14;
  bool unique_items=15; *Any enum=16; double multiple_of=17; *NamedAny vendor_extension=18
Properties: *NamedSchema additional_properties=1
QueryParameterSubSchema: bool required=1; string in=2; string description=3; string name=4;
  bool allow_empty_value=5; string type=6; string format=7; PrimitivesItems items=8;
  string collection_format=9; Any default=10; double maximum=11; bool exclusive_maximum=12;
  double minimum=13; bool exclusive_minimum=14; int64 max_length=15; int64 min_length=16;
  string pattern=17; int64 max_items=18; int64 min_items=19; bool unique_items=20; *Any enum=21;
  double multiple_of=22; *NamedAny vendor_extension=23
Response: string description=1; SchemaItem schema=2; Headers headers=3; Examples examples=4;
  *NamedAny vendor_extension=5
ResponseDefinitions: *NamedResponse additional_properties=1
ResponseValue oneof: Response response=1; JsonReference json_reference=2
Responses: *NamedResponseValue response_code=1; *NamedAny vendor_extension=2
Schema: string _ref=1; string format=2; string title=3; string description=4; Any default=5;
  double multiple_of=6; double maximum=7; bool exclusive_maximum=8; double minimum=9;
  bool exclusive_minimum=10; int64 max_length=11; int64 min_length=12; string pattern=13;
  int64 max_items=14; int64 min_items=15; bool unique_items=16; int64 max_properties=17;
  int64 min_properties=18; *string required=19; *Any enum=20;
  AdditionalPropertiesItem additional_properties=21; TypeItem type=22; ItemsItem items=23;
  *Schema all_of=24; Properties properties=25; string discriminator=26; bool read_only=27; Xml xml=28;
  ExternalDocs external_docs=29; Any example=30; *NamedAny vendor_extension=31
SchemaItem oneof: Schema schema=1; FileSchema file_schema=2
SecurityDefinitions: *NamedSecurityDefinitionsItem additional_properties=1
SecurityDefinitionsItem oneof: BasicAuthenticationSecurity basic_authentication_security=1;
  ApiKeySecurity api_key_security=2; Oauth2ImplicitSecurity oauth2_implicit_security=3;
  Oauth2PasswordSecurity oauth2_password_security=4; Oauth2ApplicationSecurity oauth2_application_security=5;
  Oauth2AccessCodeSecurity oauth2_access_code_security=6
SecurityRequirement: *NamedStringArray additional_properties=1
StringArray: *string value=1
Tag: string name=1; string description=2; ExternalDocs external_docs=3; *NamedAny vendor_extension=4
TypeItem: *string value=1
Xml: string name=1; string namespace=2; string prefix=3; bool attribute=4; bool wrapped=5;
  *NamedAny vendor_extension=6
"""

F = descriptor_pb2.FieldDescriptorProto
SCALARS = {"string": F.TYPE_STRING, "bool": F.TYPE_BOOL, "int64": F.TYPE_INT64, "double": F.TYPE_DOUBLE,
           "bytes": F.TYPE_BYTES}


def _classes() -> dict[str, type[Message]]:
    fdp = descriptor_pb2.FileDescriptorProto(name="openapiv2_test.proto", package="openapi.v2", syntax="proto3")
    for m in re.finditer(r"^(\w+)( oneof)?: (.*?)(?=^\w|\Z)", PROTO, re.M | re.S):
        msg = fdp.message_type.add(name=m.group(1))
        if m.group(2):
            msg.oneof_decl.add(name="oneof")
        for decl in m.group(3).split(";"):
            parsed = re.fullmatch(r"\s*(\*?\w+) (\w+)=(\d+)\s*", decl)
            assert parsed is not None, decl
            typ, name, number = parsed.groups()
            field = msg.field.add(name=name, number=int(number), json_name=name,
                                  label=F.LABEL_REPEATED if typ.startswith("*") else F.LABEL_OPTIONAL)
            typ = typ.lstrip("*")
            if typ in SCALARS:
                field.type = SCALARS[typ]
            else:
                field.type, field.type_name = F.TYPE_MESSAGE, ".openapi.v2." + typ
            if m.group(2):
                field.oneof_index = 0
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {d.name: message_factory.GetMessageClass(d)
            for d in pool.FindFileByName("openapiv2_test.proto").message_types_by_name.values()}


CLASSES = _classes()
MAPS = {"Definitions", "Properties", "Headers", "Examples", "ParameterDefinitions", "ResponseDefinitions",
        "SecurityDefinitions", "Oauth2Scopes", "SecurityRequirement"}


def _camel(name: str) -> str:
    if name == "_ref":
        return "$ref"
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def to_json(msg: Any) -> Any:
    """A decoded gnostic message back to the JSON it stands for (the inverse of gnostic's parse)."""
    if not isinstance(msg, Message):
        return msg
    kind = msg.DESCRIPTOR.name
    if kind == "Any":
        return yaml.safe_load(msg.yaml)
    if kind in MAPS:
        return {n.name: to_json(n.value) for n in msg.additional_properties}
    if kind == "StringArray":
        return list(msg.value)
    if kind == "TypeItem":
        return msg.value[0] if len(msg.value) == 1 else list(msg.value)
    if kind == "ItemsItem":
        return to_json(msg.schema[0]) if len(msg.schema) == 1 else [to_json(s) for s in msg.schema]
    if msg.DESCRIPTOR.oneofs:
        member = msg.WhichOneof("oneof")
        assert member is not None, f"empty oneof {kind}"
        return to_json(getattr(msg, member))
    out: dict[str, Any] = {}
    for field, value in msg.ListFields():
        if field.name in ("path", "response_code"):
            out.update({n.name: to_json(n.value) for n in value})
        elif field.name == "vendor_extension":
            out.update({n.name: to_json(n.value) for n in value})
        elif field.is_repeated:
            out[_camel(field.name)] = [to_json(v) for v in value]
        else:
            out[_camel(field.name)] = to_json(value)
    return out


def decode(raw: bytes) -> Any:
    doc = CLASSES["Document"]()
    doc.ParseFromString(raw)
    return doc


def v2_json() -> dict[str, Any]:
    raw = openapi.OpenAPI(builtin_registry()).v2().body
    out: dict[str, Any] = msgspec.json.decode(raw)
    return out


# ---- the document ------------------------------------------------------------------------------

def test_builtin_document_round_trips() -> None:
    doc = v2_json()
    raw = openapi_proto.encode_document(doc)
    msg = decode(raw)
    assert msg.SerializeToString(deterministic=True) == raw  # canonical: number order, no extras
    assert to_json(msg) == doc


def test_schema_shapes_as_gnostic() -> None:
    msg = decode(openapi_proto.encode_document(v2_json()))
    defs = {n.name: n.value for n in msg.definitions.additional_properties}
    pod_spec = {n.name: n.value for n in defs["io.k8s.api.core.v1.PodSpec"].properties.additional_properties}
    containers = pod_spec["containers"]
    assert list(containers.type.value) == ["array"]
    assert containers.items.schema[0]._ref == "#/definitions/io.k8s.api.core.v1.Container"
    ext = {n.name: n.value.yaml for n in containers.vendor_extension}
    assert yaml.safe_load(ext["x-kubernetes-patch-merge-key"]) == "name"
    assert yaml.safe_load(ext["x-kubernetes-patch-strategy"]) == "merge"
    pod = defs["io.k8s.api.core.v1.Pod"]
    gvk = {n.name: n.value.yaml for n in pod.vendor_extension}["x-kubernetes-group-version-kind"]
    assert yaml.safe_load(gvk) == [{"group": "", "kind": "Pod", "version": "v1"}]
    secret_data = {n.name: n.value for n in defs["io.k8s.api.core.v1.Secret"].properties.additional_properties}["data"]
    assert secret_data.additional_properties.WhichOneof("oneof") == "schema"
    assert secret_data.additional_properties.schema.format == "byte"


def test_paths_operations_parameters_and_responses() -> None:
    msg = decode(openapi_proto.encode_document(v2_json()))
    paths = {n.name: n.value for n in msg.paths.path}
    item = paths["/api/v1/namespaces/{namespace}/pods/{name}"]
    patch = item.patch
    ext = {n.name: yaml.safe_load(n.value.yaml) for n in patch.vendor_extension}
    assert ext["x-kubernetes-action"] == "patch"
    assert ext["x-kubernetes-group-version-kind"] == {"group": "", "kind": "Pod", "version": "v1"}
    query = [p.parameter.non_body_parameter.query_parameter_sub_schema for p in patch.parameters[:-1]]
    assert [q.name for q in query] == list(openapi.QUERY_PARAMS) and all(getattr(q, "in") == "query" for q in query)
    body = patch.parameters[-1].parameter.body_parameter
    assert body.name == "body" and getattr(body, "in") == "body" and body.required
    assert "application/apply-patch+yaml" in patch.consumes
    ok = {n.name: n.value for n in item.get.responses.response_code}["200"].response
    assert ok.schema.schema._ref == "#/definitions/io.k8s.api.core.v1.Pod"
    # {"type": "object"} fits FileSchema, which gnostic tries last and keeps
    deleted = {n.name: n.value for n in item.delete.responses.response_code}["200"].response
    assert deleted.schema.WhichOneof("oneof") == "file_schema" and deleted.schema.file_schema.type == "object"


# ---- wire details ------------------------------------------------------------------------------

def test_exact_bytes_of_a_small_document() -> None:
    doc = {"swagger": "2.0", "info": {"title": "T", "version": "v"}, "paths": {},
           "definitions": {"A": {"type": "object", "additionalProperties": False, "maxLength": 3,
                                 "minimum": 1.5, "x-k": "v"}}}
    schema = (b"\x49" + bytes.fromhex("000000000000f83f")     # 9 minimum: double, fixed64
              + b"\x58\x03"                                   # 11 max_length: int64, varint
              + b"\xaa\x01\x02\x10\x00"                        # 21 additional_properties {2 boolean: false}
              + b"\xb2\x01\x08\x0a\x06object"                  # 22 type {1 value: "object"}
              + b"\xfa\x01\x0d\x0a\x03x-k\x12\x06\x12\x04\"v\"\n")  # 31 NamedAny{x-k, Any{2 yaml}}
    named = b"\x0a\x01A\x12" + bytes([len(schema)]) + schema           # NamedSchema{1 name, 2 value}
    assert openapi_proto.encode_document(doc) == (
        b"\x0a\x032.0"                                   # 1 swagger
        + b"\x12\x06\x0a\x01T\x12\x01v"                   # 2 info {1 title, 2 version}
        + b"\x42\x00"                                     # 8 paths: present, empty
        + b"\x4a" + bytes([len(named) + 2]) + b"\x0a" + bytes([len(named)]) + named)  # 9 definitions


def test_defaults_are_left_out_and_unknown_keys_dropped() -> None:
    schema = {"type": "string", "uniqueItems": False, "maxLength": 0, "description": "",
              "nullable": True, "anyOf": [{"type": "string"}], "x-kubernetes-int-or-string": True,
              "default": "", "enum": ["a", 1, None]}
    msg = decode(openapi_proto.encode_document({"definitions": {"S": schema}}))
    got = to_json(msg)["definitions"]["S"]
    assert got == {"type": "string", "x-kubernetes-int-or-string": True, "default": "", "enum": ["a", 1, None]}


def test_other_shapes() -> None:
    doc: dict[str, Any] = {
        "swagger": "2.0", "info": {"title": "t", "version": "1", "contact": {"name": "n"}, "x-i": [1]},
        "host": "h", "basePath": "/b", "schemes": ["https"], "consumes": ["a/b"], "produces": ["c/d"],
        "paths": {"/p": {"parameters": [{"$ref": "#/parameters/q"}],
                         "get": {"operationId": "g", "tags": ["t"], "deprecated": True,
                                 "parameters": [{"name": "h", "in": "header", "type": "string", "required": True},
                                                {"name": "p", "in": "path", "type": "integer", "maximum": 9},
                                                {"name": "f", "in": "formData", "type": "array",
                                                 "items": {"type": "string", "enum": ["x"]}}],
                                 "responses": {"default": {"$ref": "#/responses/r"},
                                               "404": {"description": "nf", "headers": {"X": {"type": "string"}},
                                                       "examples": {"a/b": {"k": 1}}},
                                               "x-r": "y"},
                                 "security": [{"k": ["s1", "s2"]}]}},
                  "x-p": {"a": "b"}},
        "definitions": {"D": {"type": ["string", "null"], "items": [{"type": "string"}, {"type": "integer"}],
                              "allOf": [{"$ref": "#/definitions/E"}], "additionalProperties": True,
                              "xml": {"name": "d", "wrapped": True}, "readOnly": True, "minProperties": 1,
                              "example": {"a": [1, 2]}, "multipleOf": 0.5, "required": ["a"],
                              "properties": {"x-not-ext": {"type": "string"}}}},
        "parameters": {"q": {"name": "q", "in": "query", "type": "boolean", "allowEmptyValue": True}},
        "responses": {"r": {"description": "r", "schema": {"type": "file"}}},
        "securityDefinitions": {
            "b": {"type": "basic"}, "k": {"type": "apiKey", "name": "k", "in": "header"},
            "i": {"type": "oauth2", "flow": "implicit", "authorizationUrl": "u", "scopes": {"s": "d"}},
            "p": {"type": "oauth2", "flow": "password", "tokenUrl": "t", "scopes": {}},
            "a": {"type": "oauth2", "flow": "application", "tokenUrl": "t", "scopes": {}},
            "c": {"type": "oauth2", "flow": "accessCode", "authorizationUrl": "u", "tokenUrl": "t", "scopes": {}}},
        "security": [{"b": []}], "tags": [{"name": "t", "externalDocs": {"url": "u"}}],
        "externalDocs": {"description": "d", "url": "u"}, "x-top": None,
    }
    msg = decode(openapi_proto.encode_document(doc))
    assert to_json(msg) == doc
    kinds = {n.name: n.value.WhichOneof("oneof") for n in msg.security_definitions.additional_properties}
    assert kinds == {"b": "basic_authentication_security", "k": "api_key_security",
                     "i": "oauth2_implicit_security", "p": "oauth2_password_security",
                     "a": "oauth2_application_security", "c": "oauth2_access_code_security"}
    params = msg.paths.path[0].value.get.parameters
    assert [p.parameter.non_body_parameter.WhichOneof("oneof") for p in params] == [
        "header_parameter_sub_schema", "path_parameter_sub_schema", "form_data_parameter_sub_schema"]
    assert msg.paths.path[0].value.parameters[0].WhichOneof("oneof") == "json_reference"


def test_custom_resource_schema_in_the_protobuf_document() -> None:
    registry = builtin_registry()
    api = openapi.OpenAPI(registry)
    before = api.v2_protobuf()
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                                        "properties": {"size": {"type": "integer", "minimum": 1}}}}}
    registry.add(ResourceType(group="example.com", version="v1", resource="widgets", kind="Widget",
                              namespaced=True, singular="widget", schema=schema))
    after = api.v2_protobuf()
    assert after.body != before.body and after.etag == api.v2().etag
    defs = to_json(decode(after.body))["definitions"]
    widget = defs["com.example.v1.Widget"]
    assert widget["properties"]["spec"]["properties"]["size"] == {"type": "integer", "minimum": 1}
    assert widget["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] is True
    assert widget["x-kubernetes-group-version-kind"] == [{"group": "example.com", "kind": "Widget", "version": "v1"}]


# ---- negotiation -------------------------------------------------------------------------------

JSON = "application/json"
PROTO_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


@pytest.mark.parametrize("accept, answer", [
    ("", JSON), ("*/*", JSON), ("application/*", JSON), (JSON, JSON), ("application/json;stream=watch", JSON),
    (PB, PROTO_TYPE), (PROTO_TYPE, PROTO_TYPE),
    (f"{PB}, {JSON}", PROTO_TYPE), (f"{JSON}, {PB}", JSON),  # same q: the first clause
    (f"{JSON};q=0.5, {PB}", PROTO_TYPE),            # higher q wins
    (f"*/*, {PB}", PROTO_TYPE),                     # concrete before wildcard
    (f"{PB}, */*;q=0.1", PROTO_TYPE),
    ("application/yaml", None), ("text/html", None), ("application/vnd.kubernetes.protobuf", None),
])
def test_negotiate_v2(accept: str, answer: str | None) -> None:
    assert openapi.negotiate_v2(accept) == answer


def test_last_modified_comes_from_the_injected_clock() -> None:
    api = openapi.OpenAPI(builtin_registry(), clock=lambda: 1_700_000_000.0)
    assert api.v2().built == api.v2_protobuf().built == 1_700_000_000.0
    assert formatdate(api.v2().built, usegmt=True) == "Tue, 14 Nov 2023 22:13:20 GMT"
