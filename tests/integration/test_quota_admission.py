"""ResourceQuota admission against a real `kubecore apiserver` (this module's own), with the
resource quota controller running in-process (it fills status.hard and recalculates status.used
after deletions), and real kubectl for the error a user sees.

As upstream's e2e tests do, each test waits for the controller to have processed a new quota
(status.hard set) before creating what it counts: until then admission ignores the quota."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubecore.client.errors import Forbidden
from kubecore.client.rest import RestClient
from tests.integration.inprocess import eventually, run_controllers, run_kubectl, write_kubeconfig

Obj = dict[str, Any]


@dataclass
class Env:
    ns: str
    rest: RestClient
    url: str

    async def rc(self, api_version: str, resource: str) -> Any:
        return await self.rest.resource(api_version, resource)


@pytest.fixture
async def env(server_url: str) -> AsyncIterator[Env]:
    async with run_controllers(server_url, ("resourcequota",), ns_prefix="quota", namespaced=False,
                               max_retries=0) as running:
        yield Env(ns=running.ns, rest=running.rest, url=server_url)


def pod_body(name: str, cpu: str | None = "300m") -> Obj:
    container: Obj = {"name": "c", "image": "busybox"}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container]}}


async def make_quota(env: Env, name: str, hard: dict[str, str]) -> Any:
    quotas = await env.rc("v1", "resourcequotas")
    await quotas.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
                         "spec": {"hard": hard}}, namespace=env.ns)

    async def processed() -> bool:
        return bool(((await quotas.get(name, namespace=env.ns)).get("status") or {}).get("hard"))

    await eventually(processed, f"the controller to fill status.hard of {name}")
    return quotas


async def test_pods_over_quota_are_refused_and_admitted_ones_charged(env: Env) -> None:
    quotas = await make_quota(env, "q1", {"pods": "2", "requests.cpu": "1"})
    pods = await env.rc("v1", "pods")
    await pods.create(pod_body("p1"), namespace=env.ns)
    await pods.create(pod_body("p2"), namespace=env.ns)
    used = (await quotas.get("q1", namespace=env.ns))["status"]["used"]
    assert used == {"pods": "2", "requests.cpu": "600m"}  # charged at admission, not later by the controller
    with pytest.raises(Forbidden) as e:
        await pods.create(pod_body("p3"), namespace=env.ns)
    assert e.value.code == 403 and e.value.reason == "Forbidden"
    assert e.value.message == ('pods "p3" is forbidden: exceeded quota: q1, requested: pods=1, used: pods=2, '
                               'limited: pods=2')
    with pytest.raises(Forbidden) as e:
        await pods.create(pod_body("p4", cpu=None), namespace=env.ns)
    assert e.value.message == 'pods "p4" is forbidden: failed quota: q1: must specify requests.cpu for: c'

    await pods.delete("p1", namespace=env.ns)  # never scheduled: gone at once; the controller gives it back

    async def released() -> bool:
        used = (await quotas.get("q1", namespace=env.ns))["status"]["used"]
        return bool(used == {"pods": "1", "requests.cpu": "300m"})

    await eventually(released, "the controller to release p1's usage")
    await pods.create(pod_body("p5", cpu="300m"), namespace=env.ns, dry_run=True)  # checked, not charged
    assert (await quotas.get("q1", namespace=env.ns))["status"]["used"] == {"pods": "1", "requests.cpu": "300m"}
    await pods.create(pod_body("p5", cpu="700m"), namespace=env.ns)
    assert (await quotas.get("q1", namespace=env.ns))["status"]["used"] == {"pods": "2", "requests.cpu": "1"}
    with pytest.raises(Forbidden):
        await pods.create(pod_body("p6"), namespace=env.ns, dry_run=True)


async def test_service_type_change_is_charged(env: Env) -> None:
    quotas = await make_quota(env, "svc", {"services": "3", "services.nodeports": "1"})
    services = await env.rc("v1", "services")
    ports = [{"name": "a", "port": 80}, {"name": "b", "port": 81}]
    await services.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                           "spec": {"ports": ports}}, namespace=env.ns)
    with pytest.raises(Forbidden) as e:
        await services.patch("web", {"spec": {"type": "NodePort"}}, namespace=env.ns)
    assert e.value.message == ('services "web" is forbidden: exceeded quota: svc, requested: services.nodeports=2, '
                               'used: services.nodeports=0, limited: services.nodeports=1')
    await services.patch("web", {"spec": {"type": "NodePort", "ports": ports[:1]}}, namespace=env.ns)
    assert (await quotas.get("svc", namespace=env.ns))["status"]["used"] == {"services": "1",
                                                                            "services.nodeports": "1"}


async def test_kubectl_shows_the_quota_error(env: Env, tmp_path: Path) -> None:
    await make_quota(env, "q1", {"pods": "1"})
    kubeconfig = write_kubeconfig(tmp_path, env.url)

    async def create(name: str) -> tuple[int, str, str]:
        return await run_kubectl(kubeconfig, env.ns, "create", "-f", "-", stdin=yaml.safe_dump(pod_body(name, None)))

    code, _, err = await create("k1")
    assert code == 0, err
    code, _, err = await create("k2")
    assert code != 0
    assert ('Error from server (Forbidden): error when creating "STDIN": pods "k2" is forbidden: exceeded quota: q1, '
            'requested: pods=1, used: pods=1, limited: pods=1') in err
