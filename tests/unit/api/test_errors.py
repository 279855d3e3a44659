import msgspec
import pytest

from kubecore.api import errors as E
from kubecore.api.registry import builtin_registry

R = builtin_registry()
PODS = R.get("", "v1", "pods")
DEPLOY = R.get("apps", "v1", "deployments")


@pytest.mark.parametrize("err,body", [
    (E.not_found(PODS, "x"),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \\"x\\" not found",'
     b'"reason":"NotFound","details":{"name":"x","kind":"pods"},"code":404}\n'),
    (E.already_exists(DEPLOY, "web"),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps \\"web\\" '
     b'already exists","reason":"AlreadyExists","details":{"name":"web","group":"apps","kind":"deployments"},'
     b'"code":409}\n'),
    (E.conflict(PODS, "x"),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be '
     b'fulfilled on pods \\"x\\": the object has been modified; please apply your changes to the latest version '
     b'and try again","reason":"Conflict","details":{"name":"x","kind":"pods"},"code":409}\n'),
    (E.bad_request("the namespace of the provided object does not match the namespace sent on the request"),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the namespace of the '
     b'provided object does not match the namespace sent on the request","reason":"BadRequest","code":400}\n'),
    (E.expired("too old resource version: 1 (5)"),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: '
     b'1 (5)","reason":"Expired","code":410}\n'),
    (E.too_many_requests("slow down", 1),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"slow down",'
     b'"reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}\n'),
    (E.internal("boom"),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Internal error occurred: '
     b'boom","reason":"InternalError","details":{"causes":[{"message":"boom"}]},"code":500}\n'),
    (E.forbidden(PODS, "x", "nope"),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \\"x\\" is forbidden: '
     b'nope","reason":"Forbidden","details":{"name":"x","kind":"pods"},"code":403}\n'),
    (E.request_too_large("limit is 3145728"),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Request entity too large: '
     b'limit is 3145728","reason":"RequestEntityTooLarge","code":413}\n'),
    (E.unsupported_media_type("text/plain", ("application/json", "application/yaml")),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the body of the request '
     b'was in an unknown format - accepted media types include: application/json, application/yaml",'
     b'"reason":"UnsupportedMediaType","code":415}\n'),
    (E.method_not_allowed(("", "bindings"), "list"),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"list is not supported on '
     b'resources of kind \\"bindings\\"","reason":"MethodNotAllowed","details":{"kind":"bindings"},"code":405}\n'),
    (E.bad_request("a<b>&c"),
     b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"a\\u003cb\\u003e\\u0026c",'
     b'"reason":"BadRequest","code":400}\n'),
])
def test_status_body_byte_exact(err, body):
    assert err.body() == body
    assert msgspec.json.decode(body)["code"] == err.code


def test_invalid_single_and_many():
    e = E.invalid(PODS, "Bad_Name", [E.FieldError.invalid("metadata.name", "Bad_Name", "bad")])
    assert e.message == 'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": bad'
    assert e.status()["details"] == {"name": "Bad_Name", "kind": "Pod", "causes": [
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "Bad_Name": bad', "field": "metadata.name"}]}
    e2 = E.invalid(DEPLOY, "", [E.FieldError.required("metadata.name", "name or generateName is required"),
                                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.x"},
                                E.FieldError.required("metadata.name", "name or generateName is required")])
    assert e2.message == ('Deployment.apps "" is invalid: [metadata.name: Required value: name or generateName '
                          'is required, spec.x: Required value]')
    assert e2.status()["details"]["group"] == "apps"
    assert len(e2.status()["details"]["causes"]) == 3


@pytest.mark.parametrize("fe,text", [
    (E.FieldError.required("a.b"), "a.b: Required value"),
    (E.FieldError.forbidden("a", "not allowed on this type"), "a: Forbidden: not allowed on this type"),
    (E.FieldError.invalid("a", 5, "too big"), "a: Invalid value: 5: too big"),
    (E.FieldError.invalid("a", ["x", "y"], "d"), 'a: Invalid value: []string{"x", "y"}: d'),
    (E.FieldError.not_supported("a", "Q", ["A", "B"]), 'a: Unsupported value: "Q": supported values: "A", "B"'),
    (E.FieldError.too_long("m", 262144), "m: Too long: must have at most 262144 bytes"),
])
def test_field_error_text(fe, text):
    assert fe.error() == text


def test_success_status():
    assert E.STATUS_SUCCESS_BODY == b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"}\n'
    assert E.success_status(name="x", kind="pods", uid="u")["details"] == {"name": "x", "kind": "pods", "uid": "u"}


def test_go_quote_escapes_control_characters_as_go() -> None:
    # strconv.Quote: \xNN for ASCII controls and DEL, \uNNNN for C1 controls (the Rust side,
    # kubecore-fieldpath's canon::go_quote, is held to the same string).
    assert E.go_quote('a"b\\c\n\x01\x7f\x85é') == '"a\\"b\\\\c\\n\\x01\\x7f\\u0085é"'
