"""The stored form and the byte path: resourceVersion spliced into stored JSON without decoding."""

from __future__ import annotations

import msgspec
import pytest

from kubecore.apiserver.storage import decode, encode, with_rv


@pytest.mark.parametrize(
    "obj",
    [
        {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "resourceVersion": "7"}, "spec": {"x": [1]}},
        {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {}},
        {"apiVersion": "v1", "kind": "Namespace"},
        {"kind": "X", "metadata": {"name": "a\"metadata\":{b", "labels": {"k": "v"}}, "data": {"metadata": "{"}},
    ],
)
def test_spliced_bytes_equal_decoded_object(obj: dict) -> None:
    stored = encode(obj)
    assert b"resourceVersion" not in stored
    fast = msgspec.json.decode(with_rv(stored, 42))
    assert fast == decode(stored, 42)
    assert fast["metadata"]["resourceVersion"] == "42"
    assert {k: v for k, v in fast.items() if k != "metadata"} == {k: v for k, v in obj.items() if k != "metadata"}


def test_bytes_in_another_layout_are_reencoded() -> None:
    legacy = msgspec.json.encode({"kind": "Pod", "metadata": {"name": "p"}})
    out = msgspec.json.decode(with_rv(legacy, 9))
    assert out == {"kind": "Pod", "metadata": {"name": "p", "resourceVersion": "9"}}
