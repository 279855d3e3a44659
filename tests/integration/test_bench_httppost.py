"""bench.httppost, the benchmarks' lean POST load generator, against a real API server: every
object it reports as created exists, and an unexpected answer fails with the server's Status."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import msgspec
import pytest

from bench.httppost import PostError, post_all


def _names(url: str, path: str) -> set[str]:
    with urllib.request.urlopen(url + path, timeout=10) as r:
        return {item["metadata"]["name"] for item in json.load(r)["items"]}


def _configmaps(namespace: str, names: list[str]) -> list[tuple[str, bytes]]:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    return [(path, msgspec.json.encode({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n},
                                        "data": {"k": "v" * 3000}})) for n in names]


def test_creates_every_object_over_several_connections(server_url: str) -> None:
    ns = [("/api/v1/namespaces", msgspec.json.encode({"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": "httppost"}}))]
    asyncio.run(post_all(server_url, ns, concurrency=4))
    names = [f"cm-{i}" for i in range(300)]
    seconds = asyncio.run(post_all(server_url, _configmaps("httppost", names), concurrency=7))
    assert seconds > 0
    assert _names(server_url, "/api/v1/namespaces/httppost/configmaps") >= set(names)


def test_an_unexpected_status_raises_with_the_servers_message(server_url: str) -> None:
    ns = [("/api/v1/namespaces", msgspec.json.encode({"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": "httppost-dup"}}))]
    asyncio.run(post_all(server_url, ns, concurrency=1))
    with pytest.raises(PostError, match=r"409.*already exists"):
        asyncio.run(post_all(server_url, _configmaps("httppost-dup", ["a", "b", "a"]), concurrency=1))
    with pytest.raises(PostError, match=r"404.*not found"):
        asyncio.run(post_all(server_url, _configmaps("no-such-namespace", ["x"]), concurrency=1))


def test_only_plain_http_urls_are_accepted() -> None:
    with pytest.raises(ValueError, match="http://host:port"):
        asyncio.run(post_all("https://127.0.0.1:6443", [("/x", b"{}")], concurrency=1))
