"""Indexer and its compact codec: keys, namespace and custom indexes kept exact through
add/update/delete/replace, entries far smaller than the JSON, decoded objects equal to the input."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kubecore.client.codec import CodecError, CompactCodec, window_bits
from kubecore.client.indexer import NAMESPACE_INDEX, Indexer, meta_namespace_key, split_meta_namespace_key


def pod(name: str, *, ns: str = "default", node: str = "n1", app: str = "web") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": app, "tier": "backend"},
                         "resourceVersion": "1", "uid": f"uid-{name}"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                                      "resources": {"requests": {"cpu": "10m"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def by_node(obj: dict[str, Any]) -> list[str]:
    return [obj["spec"]["nodeName"]]


def by_labels(obj: dict[str, Any]) -> list[str]:
    return [f"{k}={v}" for k, v in obj["metadata"]["labels"].items()]


def check_indices(ix: Indexer) -> None:
    """The invariant: every index equals the index recomputed from the stored objects."""
    for name, fn in ix.get_indexers().items():
        expected: dict[str, set[str]] = {}
        for key in ix.list_keys():
            for v in fn(ix.get_by_key(key) or {}):
                expected.setdefault(v, set()).add(key)
        assert {v: set(ix.index_keys(name, v)) for v in ix.list_index_func_values(name)} == expected


def test_keys() -> None:
    assert meta_namespace_key(pod("a", ns="x")) == "x/a"
    assert meta_namespace_key({"metadata": {"name": "node1"}}) == "node1"
    assert split_meta_namespace_key("x/a") == ("x", "a") and split_meta_namespace_key("n") == ("", "n")
    with pytest.raises(ValueError):
        split_meta_namespace_key("a/b/c")


def test_indexes_follow_add_update_delete() -> None:
    ix = Indexer(indexers={"node": by_node, "labels": by_labels}, lru_size=2)
    ix.add(pod("a", node="n1"))
    ix.add(pod("b", node="n1", ns="other"))
    ix.add(pod("c", node="n2", app="db"))
    assert ix.index_keys("node", "n1") == ["default/a", "other/b"]
    assert ix.index_keys(NAMESPACE_INDEX, "default") == ["default/a", "default/c"]
    assert [o["metadata"]["name"] for o in ix.by_index("labels", "app=db")] == ["c"]
    old = ix.update(pod("a", node="n2", app="db"))  # moves between index values
    assert old is not None and ix.decode_entry(old)["spec"]["nodeName"] == "n1"
    assert ix.index_keys("node", "n1") == ["other/b"]
    assert ix.index_keys("labels", "app=db") == ["default/a", "default/c"]
    assert [o["metadata"]["name"] for o in ix.index("node", pod("x", node="n2"))] == ["a", "c"]
    ix.delete(pod("b", ns="other"))
    assert "n1" not in ix.list_index_func_values("node")  # no empty sets left behind
    assert ix.list_index_func_values(NAMESPACE_INDEX) == ["default"]
    assert ix.delete_key("missing/key") is None
    check_indices(ix)


def test_replace_swaps_content_and_returns_the_previous_entries() -> None:
    ix = Indexer(indexers={"node": by_node})
    ix.add(pod("a"))
    ix.add(pod("gone"))
    r = ix.replacement()
    r.add(pod("a", node="n9"))
    r.add(pod("b"))
    r.add(pod("b", node="n3"))  # a duplicate in one list: the last copy wins
    r.add(pod("dropped"))
    r.remove("default/dropped")
    old = ix.commit_replacement(r)
    assert sorted(old) == ["default/a", "default/gone"]
    assert ix.list_keys() == ["default/a", "default/b"]
    assert ix.index_keys("node", "n3") == ["default/b"] and ix.index_keys("node", "n1") == []
    check_indices(ix)


def test_add_indexers_later_indexes_existing_objects() -> None:
    ix = Indexer()
    for i in range(5):
        ix.add(pod(f"p{i}", node=f"n{i % 2}"))
    ix.add_indexers({"node": by_node})
    assert ix.index_keys("node", "n0") == ["default/p0", "default/p2", "default/p4"]
    with pytest.raises(ValueError):
        ix.add_indexers({"node": by_node})
    with pytest.raises(KeyError):
        ix.index_keys("nope", "x")


def test_objects_round_trip_and_entries_are_compact() -> None:
    codec = CompactCodec()
    ix = Indexer(codec=codec, lru_size=0)
    pods = [pod(f"web-{i}", node=f"node-{i % 7}") for i in range(200)]
    for p in pods:
        ix.add(p, raw=msgspec.json.encode(p))
    assert ix.list() == pods  # decoded from entries (no LRU): equal to what went in
    raw_size = sum(len(msgspec.json.encode(p)) for p in pods[1:])
    entry_size = sum(len(ix.entry(k) or b"") for k in ix.list_keys()[1:])
    assert entry_size * 3 < raw_size  # similar objects deflate against the shared dictionary
    assert codec.dictionary is not None and (ix.entry("default/web-1") or b"")[:1] == b"\x01"
    with pytest.raises(CodecError):
        CompactCodec().decode(ix.entry("default/web-5") or b"")  # another codec lacks the dictionary


def test_lru_hands_out_the_stored_object_and_forgets_evicted_ones() -> None:
    ix = Indexer(lru_size=1)
    a, b = pod("a"), pod("b")
    ix.add(a)
    assert ix.get_by_key("default/a") is a  # most recently written: shared, as client-go's cache does
    ix.add(b)
    got = ix.get_by_key("default/a")
    assert got == a and got is not a  # evicted: decoded afresh
    assert ix.get(pod("b")) is not None and ix.get_by_key("default/zzz") is None


def test_swap_returns_the_previous_object_while_the_lru_still_holds_it() -> None:
    ix = Indexer(lru_size=1)
    a1, a2, b = pod("a", node="n1"), pod("a", node="n2"), pod("b")
    assert ix.swap(a1) == (None, None)
    entry, old = ix.swap(a2)
    assert entry is not None and old is a1  # no decode: the object the LRU held
    ix.add(b)  # evicts a2 from the one-object LRU
    entry, old = ix.swap(pod("a", node="n3"))
    assert old is None and ix.decode_entry(entry or b"") == a2  # only the entry is left


def test_copy_by_key_is_the_callers_own() -> None:
    ix = Indexer()
    a = pod("a")
    ix.add(a)
    mine = ix.copy_by_key("default/a")
    assert mine == a and mine is not a and mine is not ix.get_by_key("default/a")
    assert mine is not None
    mine["spec"]["nodeName"] = "changed"
    assert ix.get_by_key("default/a") == a
    assert ix.copy_by_key("default/none") is None


@pytest.mark.parametrize("dict_len, bits", [(100, 9), (256, 9), (1_000, 11), (1_600, 12), (3_000, 13),
                                            (20_000, 15), (32_768, 15)])
def test_the_deflate_window_fits_the_dictionary(dict_len: int, bits: int) -> None:
    assert window_bits(dict_len) == -bits
    assert 2 ** bits >= min(2 * dict_len, 2 ** 15)


def test_objects_larger_than_the_window_round_trip() -> None:
    codec = CompactCodec()
    small = pod("first")
    codec.encode(small)  # the dictionary: ~0.5 KB, so a 1-2 KB window
    assert codec.wbits >= -11
    big = pod("big")
    big["metadata"]["annotations"] = {f"k{i}": "v" * 200 + str(i) for i in range(200)}  # ~45 KB
    entry = codec.encode(big)
    assert entry[:1] == b"\x01" and codec.decode(entry) == big


# -- bytes-level transforms, json_of, updates that cannot move an index ---------------------------------
def test_prepare_raw_cuts_managed_fields_and_keeps_the_bytes_of_the_result() -> None:
    from kubecore.client.indexer import NotAnObject, strip_managed_fields

    with_managed = pod("a")
    with_managed["metadata"]["managedFields"] = [{"manager": "m", "fieldsV1": {"f:spec": {}}}]
    raw = msgspec.json.encode(with_managed)
    plain = Indexer(codec=CompactCodec(compress=False))
    assert plain.prepare_raw(raw) == (with_managed, raw)  # no transform: decoded, bytes still valid
    ix = Indexer(codec=CompactCodec(compress=False))
    ix.transform = strip_managed_fields
    obj, out = ix.prepare_raw(raw)
    assert out is not None and "managedFields" not in obj["metadata"] and msgspec.json.decode(out) == obj
    ix.transform = lambda o: {**o, "extra": 1}  # no bytes-level equivalent: the dict transform, bytes dropped
    assert ix.prepare_raw(raw) == ({**with_managed, "extra": 1}, None)
    with pytest.raises(NotAnObject):
        plain.prepare_raw(b"[1]")
    r = ix.replacement()
    ix.transform = strip_managed_fields
    assert r.add_raw(raw) == "default/a" and msgspec.json.decode(r.items["default/a"]) == obj


def test_json_of_answers_only_for_the_cached_object_itself() -> None:
    ix = Indexer(codec=CompactCodec(compress=False))
    raw = msgspec.json.encode(pod("a"))
    obj, prepared = ix.prepare_raw(raw)
    ix.put(obj, raw=prepared)
    assert ix.json_of(obj) is not None and msgspec.json.decode(ix.json_of(obj) or b"") == obj
    assert ix.json_of(dict(obj)) is None  # an equal copy: the caller may have changed it
    assert ix.json_of({"metadata": {}}) is None  # no key
    deflated = Indexer()
    big = pod("b")
    deflated.put(big, raw=msgspec.json.encode(big))
    assert deflated.json_of(big) is None  # the entry is deflated: not worth inflating


def test_an_update_keeps_key_derived_indexes_and_moves_object_ones() -> None:
    ix = Indexer(indexers={"node": by_node})
    ix.put(pod("a", node="n1"))
    ix.put(pod("a", node="n2"))
    assert ix.index_keys("node", "n1") == [] and ix.index_keys("node", "n2") == ["default/a"]
    only_ns = Indexer()
    only_ns.put(pod("a"))
    only_ns.put(pod("a", node="n2"))
    assert only_ns.index_keys(NAMESPACE_INDEX, "default") == ["default/a"]
    assert only_ns.list_index_func_values(NAMESPACE_INDEX) == ["default"]
    only_ns.delete(pod("a"))
    assert only_ns.list_index_func_values(NAMESPACE_INDEX) == []
