"""An expired continue token gets upstream's 410 with a token that continues at the latest
revision, and that token works."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubecore.api import errors
from kubecore.api.registry import builtin_registry
from kubecore.apiserver.storage import ObjectStore, encode
from kubecore.store import Store

CMS = builtin_registry().get("", "v1", "configmaps")


def test_expired_continue_token_carries_a_fresh_one(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s", fsync=False)
    try:
        objects = ObjectStore(store)
        for n in ("a", "b", "c"):
            store.put(CMS.key("ns", n), encode({"metadata": {"name": n, "namespace": "ns"}, "data": {"k": n}}))
        first = objects.list(CMS, "ns", limit=1)
        assert [o["metadata"]["name"] for o in first.items] == ["a"] and first.continue_token
        store.put(CMS.key("ns", "b"), encode({"metadata": {"name": "b", "namespace": "ns"}, "data": {"k": "B"}}))
        store.compact(store.revision)
        with pytest.raises(errors.StatusError) as e:
            objects.list(CMS, "ns", limit=1, continue_token=first.continue_token)
        assert e.value.code == 410 and e.value.reason == "Expired"
        assert e.value.message.startswith("The provided continue parameter is too old")
        fresh = e.value.status()["metadata"]["continue"]
        rest = objects.list(CMS, "ns", limit=10, continue_token=fresh)
        assert [(o["metadata"]["name"], o["data"]["k"]) for o in rest.items] == [("b", "B"), ("c", "c")]
        assert rest.revision == store.revision  # read at the latest revision
        assert list(e.value.status()) == ["kind", "apiVersion", "metadata", "status", "message", "reason", "code"]
    finally:
        store.close()
