"""A generated name that is already taken is generated again (RetryGenerateName)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from kubecore.api import errors, meta
from kubecore.api.registry import builtin_registry
from kubecore.apiserver import rest

REG = builtin_registry()
CMS = REG.get("", "v1", "configmaps")


class TakenNames:
    """An object store where some names already exist."""

    def __init__(self, taken: set[str]) -> None:
        self.taken, self.tried = taken, []

    async def create_encoded(self, rt: Any, namespace: str, name: str, obj: dict[str, Any]) -> bytes:
        self.tried.append(name)
        if name in self.taken:
            raise errors.already_exists(rt, name)
        return msgspec.json.encode(obj)


def _resources(objects: TakenNames) -> rest.Resources:
    return rest.Resources(REG, objects, admission=None, allocators=None)  # type: ignore[arg-type]


def _obj(name: str, generate: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "generateName": generate}}


def test_a_taken_generated_name_is_generated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    names = iter(["web-bbbbb", "web-ccccc"])
    monkeypatch.setattr(meta, "generate_name", lambda base, rand=None: next(names))
    objects = TakenNames({"web-aaaaa", "web-bbbbb"})
    out = msgspec.json.decode(asyncio.run(_resources(objects)._store_create(CMS, "ns", _obj("web-aaaaa", "web-"), generated=True)))
    assert out["metadata"]["name"] == "web-ccccc" and objects.tried == ["web-aaaaa", "web-bbbbb", "web-ccccc"]


def test_after_eight_attempts_the_conflict_names_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meta, "generate_name", lambda base, rand=None: "web-zzzzz")
    objects = TakenNames({"web-aaaaa", "web-zzzzz"})
    with pytest.raises(errors.StatusError) as e:
        asyncio.run(_resources(objects)._store_create(CMS, "ns", _obj("web-aaaaa", "web-"), generated=True))
    assert len(objects.tried) == rest.MAX_NAME_ATTEMPTS and e.value.code == 409
    assert e.value.message.endswith("the server was not able to generate a unique name for the object")


def test_a_given_name_is_never_replaced() -> None:
    objects = TakenNames({"mine"})
    with pytest.raises(errors.StatusError) as e:
        asyncio.run(_resources(objects)._store_create(CMS, "ns", _obj("mine", "web-"), generated=False))
    assert objects.tried == ["mine"] and e.value.message == 'configmaps "mine" already exists'
