import pytest

from kubecore.api import validation as V

SUB = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
       "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
       "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
         "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
         "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
D1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
         "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
         "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


@pytest.mark.parametrize("fn,value,errs", [
    (V.is_dns1123_subdomain, "a.b-c", []),
    (V.is_dns1123_subdomain, "Bad_Name", [SUB]),
    (V.is_dns1123_subdomain, "-a", [SUB]),
    (V.is_dns1123_subdomain, "a" * 254, ["must be no more than 253 characters"]),
    (V.is_dns1123_subdomain, "a\n", [SUB]),
    (V.is_dns1123_label, "ab", []),
    (V.is_dns1123_label, "a.b", ["must not contain dots"]),
    (V.is_dns1123_label, "A", [LABEL]),
    (V.is_dns1123_label, "a" * 64, ["must be no more than 63 characters"]),
    (V.is_dns1035_label, "1abc", [D1035]),
    (V.is_dns1035_label, "abc", []),
    (V.name_is_dns_subdomain, "web-", [SUB]),
    (lambda v: V.name_is_dns_subdomain(v, True), "web-", []),
    (lambda v: V.validate_path_segment_name(v, False), "..", ["may not be '..'"]),
    (lambda v: V.validate_path_segment_name(v, False), "a/b%", ["may not contain '/'", "may not contain '%'"]),
    (lambda v: V.validate_path_segment_name(v, False), "system:admin", []),
    (V.is_qualified_name, "example.com/a", []),
    (V.is_qualified_name, "a/b/c", ["a valid label key must consist of alphanumeric characters, '-', '_' or '.', "
                                    "and must start and end with an alphanumeric character (e.g. 'MyName',  or "
                                    "'my.name',  or '123-abc', regex used for validation is "
                                    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain "
                                    "prefix and '/' (e.g. 'example.com/MyName')"]),
    (V.is_qualified_name, "a/", ["name part must be non-empty", "name part must consist of alphanumeric "
                                 "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                                 "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                                 "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]),
    (V.is_label_value, "", []),
    (V.is_label_value, "x" * 64, ["must be no more than 63 characters"]),
])
def test_rules(fn, value, errs):
    if fn is V.name_is_dns_subdomain:
        assert fn(value, False) == errs
    else:
        assert fn(value) == errs


def test_labels_and_annotations():
    errs = V.validate_labels({"ok": "v", "bad key": "v", "k": "bad value"}, "metadata.labels")
    assert [e.field for e in errs] == ["metadata.labels", "metadata.labels"]
    assert errs[0].body.startswith('Invalid value: "bad key": name part must consist')
    assert V.validate_annotations({"A/b": "x"}, "metadata.annotations") == []  # keys are lower-cased first
    assert V.validate_annotations({"a b": "x"}, "m")[0].error().startswith('m: Invalid value: "a b": name part')
    assert V.validate_annotations({"x": "y" * (256 * 1024)}, "m")[0].error() == "m: Too long: must have at most 262144 bytes"


def test_finalizers_and_owners():
    errs = V.validate_finalizers(["orphan", "foregroundDeletion"], "metadata.finalizers")
    assert errs[0].body.endswith("finalizer orphan and foregroundDeletion cannot be both set")
    refs = [{"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "1", "controller": True},
            {"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": "2", "controller": True},
            {"apiVersion": "", "kind": "", "name": "c", "uid": "3"}]
    msgs = [e.error() for e in V.validate_owner_references(refs, "metadata.ownerReferences")]
    assert any('Only one reference can have Controller set to true. Found "true" in references for Pod/a and Pod/b'
               in m for m in msgs)
    assert 'metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty' in msgs
    assert 'metadata.ownerReferences.kind: Invalid value: "": must not be empty' in msgs
