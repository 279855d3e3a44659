import pytest

from kubecore.api.errors import StatusError
from kubecore.api.registry import ResourceType, builtin_registry
from kubecore.api.selectors import object_fields, parse_field_selector, parse_label_selector, supported_fields

R = builtin_registry()

LABELS = {"app": "web", "tier": "front", "n": "5", "empty": ""}


@pytest.mark.parametrize("sel,matches,text", [
    ("", True, ""),
    ("app=web", True, "app=web"),
    ("app==web", True, "app==web"),
    ("app!=web", False, "app!=web"),
    ("app!=db", True, "app!=db"),
    ("missing!=x", True, "missing!=x"),
    ("app in (web,db)", True, "app in (db,web)"),
    ("app notin (web)", False, "app notin (web)"),
    ("missing notin (web)", True, "missing notin (web)"),
    ("app", True, "app"),
    ("!app", False, "!app"),
    ("!missing", True, "!missing"),
    ("app=web,tier=front", True, "app=web,tier=front"),
    (" app = web , tier in ( front ) ", True, "app=web,tier in (front)"),
    ("n>4", True, "n>4"),
    ("n<4", False, "n<4"),
    ("app>4", False, "app>4"),
    ("empty=", True, "empty="),
    ("app in (in,notin)", False, "app in (in,notin)"),
    ("x in (,)", False, "x in ()"),
    ("example.com/key=v", False, "example.com/key=v"),
])
def test_label_selector_ok(sel, matches, text):
    s = parse_label_selector(sel)
    assert s.matches(LABELS) is matches
    assert str(s) == text
    assert s.empty is (sel == "")


@pytest.mark.parametrize("sel,msg", [
    ("a in b", "unable to parse requirement: found 'b' expected: '('"),
    ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("a=b c", "found 'c', expected: ',' or 'end of string'"),
    ("a=b,", "found '', expected: identifier after ','"),
    ("=a", "found '=', expected: !, identifier, or 'end of string'"),
    ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("!", "unable to parse requirement: found '', expected: identifier"),
    ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
    ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ("a>b", "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, "
            "the value must be an integer"),
    ("a=b$", "unable to parse requirement: values[0][a]: Invalid value: \"b$\": a valid label must be an empty "
             "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
             "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
    ("k$=v", "unable to parse requirement: <nil>: Invalid value: \"k$\": name part must consist of alphanumeric "
             "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', "
             " or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ("/k=v", "unable to parse requirement: <nil>: Invalid value: \"/k\": prefix part must be non-empty"),
])
def test_label_selector_errors(sel, msg):
    with pytest.raises(StatusError) as ei:
        parse_label_selector(sel)
    assert ei.value.code == 400 and ei.value.reason == "BadRequest"
    assert ei.value.message == msg


def test_label_selector_exact_match():
    assert parse_label_selector("a in (x)").requires_exact_match("a") == "x"
    assert parse_label_selector("a!=x").requires_exact_match("a") is None


@pytest.mark.parametrize("sel,fields,matches", [
    ("", {}, True),
    ("metadata.name=x", {"metadata.name": "x"}, True),
    ("metadata.name==x", {"metadata.name": "x"}, True),
    ("metadata.name!=x", {"metadata.name": "x"}, False),
    ("spec.nodeName=", {"spec.nodeName": ""}, True),
    ("spec.nodeName=", {}, True),
    ("a=b,c!=d", {"a": "b", "c": "e"}, True),
    ("a=x\\,y", {"a": "x,y"}, True),
    ("a=x\\=y\\\\", {"a": "x=y\\"}, True),
])
def test_field_selector(sel, fields, matches):
    assert parse_field_selector(sel).matches(fields) is matches


@pytest.mark.parametrize("sel,msg", [
    ("abc", "invalid selector: 'abc'; can't understand 'abc'"),
    ("a=b,xyz", "invalid selector: 'a=b,xyz'; can't understand 'xyz'"),
    ("a=b\\x", "invalid field selector: invalid escape sequence: \\x"),
    ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
    ("a==b=c", "invalid field selector: unescaped character in value: 61"),
])
def test_field_selector_errors(sel, msg):
    with pytest.raises(StatusError) as ei:
        parse_field_selector(sel)
    assert (ei.value.code, ei.value.message) == (400, msg)


@pytest.mark.parametrize("resource,group,sel,msg", [
    ("pods", "", "spec.foo=x", "field label not supported: spec.foo"),
    ("nodes", "", "metadata.namespace=x", "field label not supported: metadata.namespace"),
    ("configmaps", "", "data.x=y", '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"'),
    ("jobs", "batch", "spec.x=1", 'field label "spec.x" not supported for batchv1.Job'),
    ("statefulsets", "apps", "spec.x=1", "field label not supported for appsv1.StatefulSet: spec.x"),
])
def test_unsupported_field_label(resource, group, sel, msg):
    rt = R.get(group, "v1", resource)
    with pytest.raises(StatusError) as ei:
        parse_field_selector(sel, rt)
    assert (ei.value.code, ei.value.message) == (400, msg)


def test_field_label_conversion():
    pods = R.get("", "v1", "pods")
    assert str(parse_field_selector("spec.host=n1", pods)) == "spec.nodeName=n1"
    ev = R.get("events.k8s.io", "v1", "events")
    assert str(parse_field_selector("regarding.name=p", ev)) == "involvedObject.name=p"
    crd_rt = ResourceType("ex.com", "v1", "foos", "Foo", False, "foo")
    with pytest.raises(StatusError) as ei:
        parse_field_selector("metadata.namespace=a", crd_rt)
    assert ei.value.message == "field label not supported for ex.com/v1, Kind=Foo: metadata.namespace"
    assert "spec.unschedulable" in supported_fields(R.get("", "v1", "nodes"))


POD = {"metadata": {"name": "p", "namespace": "d"},
       "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "serviceAccountName": "default"},
       "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}]}}


@pytest.mark.parametrize("group,resource,obj,expected", [
    ("", "pods", POD, {"metadata.name": "p", "metadata.namespace": "d", "spec.nodeName": "n1",
                       "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
                       "spec.serviceAccountName": "default", "spec.hostNetwork": "false",
                       "status.phase": "Running", "status.podIP": "10.0.0.1", "status.nominatedNodeName": ""}),
    ("", "nodes", {"metadata": {"name": "n"}, "spec": {"unschedulable": True}},
     {"metadata.name": "n", "spec.unschedulable": "true"}),
    ("", "secrets", {"metadata": {"name": "s", "namespace": "d"}, "type": "Opaque"},
     {"metadata.name": "s", "metadata.namespace": "d", "type": "Opaque"}),
    ("", "namespaces", {"metadata": {"name": "d"}, "status": {"phase": "Active"}},
     {"metadata.name": "d", "status.phase": "Active"}),
    ("", "replicationcontrollers", {"metadata": {"name": "r", "namespace": "d"}},
     {"metadata.name": "r", "metadata.namespace": "d", "status.replicas": "0"}),
    ("batch", "jobs", {"metadata": {"name": "j", "namespace": "d"}, "status": {"succeeded": 2}},
     {"metadata.name": "j", "metadata.namespace": "d", "status.successful": "2"}),
    ("", "configmaps", {"metadata": {"name": "c", "namespace": "d"}},
     {"metadata.name": "c", "metadata.namespace": "d"}),
])
def test_object_fields(group, resource, obj, expected):
    rt = R.get(group, "v1", resource)
    assert object_fields(rt, obj) == expected


def test_event_fields():
    core = {"metadata": {"name": "e", "namespace": "d"}, "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Started", "source": {"component": "kubelet"}, "type": "Normal",
            "reportingComponent": "kubelet"}
    f = object_fields(R.get("", "v1", "events"), core)
    assert f["involvedObject.kind"] == "Pod" and f["source"] == "kubelet" and f["involvedObject.uid"] == ""
    new = {"metadata": {"name": "e", "namespace": "d"}, "regarding": {"kind": "Pod", "name": "p"},
           "reason": "Started", "reportingController": "kubelet", "type": "Normal"}
    ev = R.get("events.k8s.io", "v1", "events")
    sel = parse_field_selector("regarding.kind=Pod,reportingController=kubelet", ev)
    assert sel.matches(object_fields(ev, new))
