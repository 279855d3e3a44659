"""The service account controller's sync: create what is missing in active namespaces only,
tolerate AlreadyExists and terminating namespaces (fake client and caches)."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.client.errors import AlreadyExists, Forbidden
from kubecore.client.indexer import Indexer
from kubecore.controllers.serviceaccount import ServiceAccountsController, missing_accounts

Obj = dict[str, Any]


class FakeSAs:
    def __init__(self, error: Exception | None = None) -> None:
        self.created: list[Obj] = []
        self.error = error

    async def create(self, body: Obj, *, namespace: str) -> Obj:
        if self.error is not None:
            raise self.error
        self.created.append(body)
        return body


def controller(client: FakeSAs, namespaces: list[Obj], sas: list[Obj]) -> ServiceAccountsController:
    c = ServiceAccountsController(rest=None, informers=None)  # type: ignore[arg-type]
    c.sa_client = client  # type: ignore[assignment]
    c.ns_indexer, c.sa_indexer = Indexer(), Indexer()
    for ns in namespaces:
        c.ns_indexer.put(ns)
    for sa in sas:
        c.sa_indexer.put(sa)
    return c


def ns(name: str, phase: str = "Active") -> Obj:
    return {"metadata": {"name": name}, "status": {"phase": phase}}


def test_missing_accounts() -> None:
    existing = Indexer()
    existing.put({"metadata": {"name": "default", "namespace": "a"}})
    wanted = [{"metadata": {"name": "default"}}, {"metadata": {"name": "builder"}}]
    assert missing_accounts(wanted, "a", existing) == [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder", "namespace": "a"}}]


async def test_sync_creates_default_in_active_namespace_only() -> None:
    client = FakeSAs()
    c = controller(client, [ns("a"), ns("b", "Terminating")], [])
    await c.sync("a")
    await c.sync("b")
    await c.sync("gone")
    assert [(b["metadata"]["namespace"], b["metadata"]["name"]) for b in client.created] == [("a", "default")]


async def test_sync_tolerates_already_exists_and_terminating() -> None:
    await controller(FakeSAs(AlreadyExists({"message": "exists"}, code=409)), [ns("a")], []).sync("a")
    terminating = Forbidden({"message": "terminating", "details": {"causes": [{"type": "NamespaceTerminating"}]}},
                            code=403)
    await controller(FakeSAs(terminating), [ns("a")], []).sync("a")
    with pytest.raises(Forbidden):
        await controller(FakeSAs(Forbidden({"message": "no"}, code=403)), [ns("a")], []).sync("a")
