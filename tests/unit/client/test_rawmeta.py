"""rawmeta: the managedFields cut gives exactly what the dict transform gives (same keys, same order),
whatever the layout, and falls back rather than guess; the probe reads metadata in one pass."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubecore.client.indexer import strip_managed_fields
from kubecore.client.rawmeta import decode_without_managed_fields, probe

MANAGED = [{"manager": "kubecore-client", "operation": "Update", "apiVersion": "v1",
            "time": "2026-12-03T10:42:08Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"pause"}': {".": {}, "f:image": {}}}}}}]


def pod(*, meta_first: dict[str, Any] | None = None, managed: Any = MANAGED, where: int = 2,
        spec_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    items: list[tuple[str, Any]] = [("resourceVersion", "12"), ("name", "web-0"), ("namespace", "default"),
                                    ("uid", "u-1")]
    if managed is not None:
        items.insert(where, ("managedFields", managed))
    meta = {**(meta_first or {}), **dict(items)}
    return {"metadata": meta, "apiVersion": "v1", "kind": "Pod",
            "spec": {"containers": [{"name": "pause", "image": "pause:3.10"}], **(spec_extra or {})},
            "status": {"phase": "Pending"}}


def expected(raw: bytes) -> dict[str, Any]:
    return strip_managed_fields(msgspec.json.decode(raw))


def check(raw: bytes) -> tuple[dict[str, Any], bytes]:
    obj, out = decode_without_managed_fields(raw)
    want = expected(raw)
    assert obj == want
    assert list(obj["metadata"]) == list(want["metadata"])  # same order, not only the same keys
    assert msgspec.json.decode(out) == want
    return obj, out


@pytest.mark.parametrize("where", [0, 2, 4])
def test_the_member_is_cut_out_of_the_bytes_wherever_it_stands(where: int) -> None:
    raw = msgspec.json.encode(pod(where=where))
    obj, out = check(raw)
    assert "managedFields" not in obj["metadata"]
    assert len(out) < len(raw) and b"managedFields" not in out
    assert out == msgspec.json.encode(expected(raw))  # exactly the compact bytes, commas included


def test_a_metadata_holding_only_the_member() -> None:
    raw = b'{"metadata":{"managedFields":[{"manager":"m"}]},"kind":"Pod"}'
    obj, out = check(raw)
    assert obj == {"metadata": {}, "kind": "Pod"} and out == b'{"metadata":{},"kind":"Pod"}'


def test_null_member_is_dropped_as_the_dict_transform_drops_it() -> None:
    obj, _ = check(msgspec.json.encode(pod(managed=None)).replace(b'"uid"', b'"managedFields":null,"uid"'))
    assert "managedFields" not in obj["metadata"]


def test_pretty_printed_json_is_handled() -> None:
    check(json.dumps(pod(), indent=2).encode())
    check(json.dumps(pod(), indent=1, separators=(" , ", " : ")).encode())


def test_a_member_of_that_name_elsewhere_is_kept() -> None:
    both = msgspec.json.encode(pod(spec_extra={"managedFields": MANAGED}))
    obj, _ = check(both)
    assert obj["spec"]["managedFields"] == MANAGED
    only_spec = msgspec.json.encode(pod(managed=None, spec_extra={"managedFields": MANAGED}))
    obj, out = check(only_spec)
    assert obj["spec"]["managedFields"] == MANAGED and out == only_spec


def test_a_key_spelled_with_escapes_is_still_removed() -> None:
    raw = msgspec.json.encode(pod()).replace(b'"managedFields"', b'"managedFi\\u0065lds"')
    obj, _ = check(raw)
    assert "managedFields" not in obj["metadata"]


def test_strings_that_look_like_the_member_do_not_fool_the_cut() -> None:
    tricky = [{"manager": 'x"],"managedFields":[1]}', "fieldsV1": {'k:{"managedFields":[]}': {}}}]
    raw = msgspec.json.encode(pod(managed=tricky, meta_first={"annotations": {"a": '"managedFields":[]'}}))
    obj, _ = check(raw)
    assert obj["metadata"]["annotations"] == {"a": '"managedFields":[]'}


def test_no_member_returns_the_bytes_unchanged() -> None:
    raw = msgspec.json.encode(pod(managed=None))
    obj, out = check(raw)
    assert out is raw


def test_a_json_value_that_is_not_an_object_comes_back_as_decoded() -> None:
    assert decode_without_managed_fields(b"[1,2]") == ([1, 2], b"[1,2]")
    assert decode_without_managed_fields(b'{"metadata":"managedFields"}')[0] == {"metadata": "managedFields"}
    with pytest.raises(msgspec.DecodeError):
        decode_without_managed_fields(b'{"metadata":{"managedFields":[}')


def test_probe_reads_resource_version_annotations_and_locates_the_member() -> None:
    raw = msgspec.json.encode(pod(meta_first={"annotations": {"k8s.io/initial-events-end": "true"}}))
    p = probe(raw)
    assert p.metadata.resourceVersion == "12"
    assert p.metadata.annotations == {"k8s.io/initial-events-end": "true"}
    assert msgspec.json.decode(bytes(p.metadata.managedFields)) == MANAGED
    obj, _ = decode_without_managed_fields(raw, probed=p)
    assert obj == expected(raw)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                     max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(before=st.dictionaries(st.sampled_from(["name", "uid", "x", "managedFields"]), _json, max_size=3),
       managed=_json, after=st.dictionaries(st.text(max_size=6), _json, max_size=2),
       spec=st.dictionaries(st.sampled_from(["managedFields", "a"]), _json, max_size=2), indent=st.booleans())
def test_any_layout_gives_the_dict_transform(before: dict[str, Any], managed: Any, after: dict[str, Any],
                                             spec: dict[str, Any], indent: bool) -> None:
    meta = {**before, "managedFields": managed, **after}
    obj = {"metadata": meta, "spec": spec}
    raw = json.dumps(obj, indent=2).encode() if indent else msgspec.json.encode(obj)
    check(raw)


# -- a managedFields value validated once is compared, not passed over, in later documents ------------
def test_a_value_seen_before_is_recognised_and_the_result_is_the_same() -> None:
    from kubecore.client import rawmeta

    raw = msgspec.json.encode(pod(where=4))
    first = check(raw)
    assert rawmeta._known_value(raw, raw.find(b'"managedFields":')) == len(msgspec.json.encode(MANAGED))
    assert check(raw) == first
    bound = msgspec.json.encode({**pod(where=4), "spec": {"nodeName": "n0"}})
    assert rawmeta._known_value(bound, bound.find(b'"managedFields":')) > 0
    check(bound)


def test_a_value_seen_before_in_another_place_is_not_taken_for_the_member() -> None:
    from kubecore.client import rawmeta

    check(msgspec.json.encode(pod()))  # MANAGED is now a validated value
    elsewhere = [pod(managed=None, spec_extra={"managedFields": MANAGED}),  # spec's, metadata has none
                 {"metadata": {"name": "x", "labels": {"managedFields": MANAGED}}},  # one level deeper
                 {"managedFields": MANAGED, "metadata": {"name": "x"}}]  # top level
    for obj in elsewhere:
        raw = msgspec.json.encode(obj)
        assert rawmeta._known_value(raw, raw.find(b'"managedFields":')) == 0
        got, out = check(raw)
        assert out == raw
    value = msgspec.json.encode(MANAGED)
    escaped_first = b'{"metadata":{"managedFi\\u0065lds":1,"name":"x","managedFields":' + value + b'},"kind":"Pod"}'
    assert rawmeta._known_value(escaped_first, escaped_first.find(b'"managedFields":')) > 0
    obj, _ = check(escaped_first)  # the cut leaves the escaped one, so the whole object is decoded
    assert obj == {"metadata": {"name": "x"}, "kind": "Pod"}


def test_a_document_broken_after_a_value_seen_before_still_raises() -> None:
    raw = msgspec.json.encode(pod(where=4))
    check(raw)
    at = raw.index(b'"apiVersion"')
    for broken in (raw[:at] + b'"apiVersion":}', raw[:-1], raw + b"x", raw[:at] + b"," + raw[at:]):
        with pytest.raises(msgspec.DecodeError):
            decode_without_managed_fields(broken)


def test_the_values_kept_are_bounded() -> None:
    from kubecore.client import rawmeta

    for i in range(rawmeta._VALIDATED_LIMIT + 40):
        managed = [{**MANAGED[0], "time": f"2026-12-03T10:42:{i:04d}Z"}]
        check(msgspec.json.encode(pod(managed=managed)))
    assert len(rawmeta._validated) <= rawmeta._VALIDATED_LIMIT


@settings(max_examples=200, deadline=None)
@given(managed=_json, other=st.dictionaries(st.sampled_from(["managedFields", "a"]), _json, max_size=2),
       deeper=st.booleans(), after=st.dictionaries(st.text(max_size=6), _json, max_size=2))
def test_a_value_seen_before_gives_the_dict_transform_wherever_it_comes_back(
        managed: Any, other: dict[str, Any], deeper: bool, after: dict[str, Any]) -> None:
    managed = [managed, "p" * 130]  # long enough to be kept (rawmeta._FINGERPRINT)
    check(msgspec.json.encode({"metadata": {"name": "a", "managedFields": managed}}))
    meta: dict[str, Any] = {"name": "b", **({"labels": {"managedFields": managed}} if deeper else {}), **after}
    check(msgspec.json.encode({"metadata": meta, "spec": {**other, "managedFields": managed}}))
    check(msgspec.json.encode({"metadata": {"managedFields": managed, **after}, "spec": other}))


def test_only_long_arrays_are_kept_as_validated_values() -> None:
    from kubecore.client import rawmeta

    number = "1" * 200  # a number is a prefix of a longer one: never kept
    for managed in (int(number), "s" * 200, {"k": "v" * 200}, [1]):
        raw = msgspec.json.encode({"metadata": {"name": "x", "managedFields": managed}})
        check(raw)
        assert not any(v.startswith(msgspec.json.encode(managed)[:20]) for vs in rawmeta._validated.values() for v in vs)
    longer = b'{"metadata":{"name":"x","managedFields":' + number.encode() + b"5}}"
    check(longer)
