"""ResourceQuota admission (kubecore.apiserver.quota_admission): what a request is charged, the
messages of a refusal (upstream's wording), updates charged by their difference, and the plugin
against a real store: the charge is written with a compare-and-swap, retried when it loses a race,
skipped for dryRun, and nothing is read beyond one keys-only range in a namespace without quotas."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubecore.api import errors
from kubecore.api.quota import evaluator_for, to_json
from kubecore.api.registry import ResourceType, builtin_registry
from kubecore.apiserver.lookups import Lookups
from kubecore.apiserver.quota_admission import Charge, QuotaError, ResourceQuotaAdmission, check_request
from kubecore.apiserver.storage import ObjectStore
from kubecore.store import Store

Obj = dict[str, Any]
NOW = 1_700_000_000.0
REG = builtin_registry()
PODS, SERVICES = evaluator_for(("", "pods")), evaluator_for(("", "services"))
PVCS = evaluator_for(("", "persistentvolumeclaims"))


def _rt(group: str, version: str, resource: str) -> ResourceType:
    rt = REG.get(group, version, resource)
    assert rt is not None
    return rt


POD_RT, QUOTA_RT, CM_RT = _rt("", "v1", "pods"), _rt("", "v1", "resourcequotas"), _rt("", "v1", "configmaps")


def quota(hard: dict[str, str], used: dict[str, str] | None, *, name: str = "q1", scopes: list[str] | None = None,
          selector: list[Obj] | None = None, status_hard: bool = True) -> Obj:
    spec: Obj = {"hard": hard}
    if scopes:
        spec["scopes"] = scopes
    if selector:
        spec["scopeSelector"] = {"matchExpressions": selector}
    status: Obj = {}
    if status_hard:
        status["hard"] = hard
    if used is not None:
        status["used"] = used
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": "ns",
                                                                       "resourceVersion": "7"},
            "spec": spec, "status": status}


def pod(name: str = "x", *, cpu: str | None = "500m", memory: str | None = None, limits: dict[str, str] | None = None,
        extra: list[Obj] | None = None, priority: str = "") -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    container: Obj = {"name": "app", "image": "busybox", "resources": {"requests": requests, "limits": limits or {}}}
    spec: Obj = {"containers": [container, *(extra or [])]}
    if priority:
        spec["priorityClassName"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def refusal(quotas: list[Obj], obj: Obj, ev: Any = PODS, old: Obj | None = None) -> str:
    with pytest.raises(QuotaError) as e:
        check_request(quotas, ev, obj, old, now=NOW)
    return str(e.value)


def used_after(charges: list[Charge]) -> list[tuple[str, dict[str, str]]]:
    return [(c.quota["metadata"]["name"], to_json(c.used)) for c in charges]


# -- pure evaluation ----------------------------------------------------------------------------------
def test_create_charges_every_matching_quota() -> None:
    q1 = quota({"pods": "2", "requests.cpu": "1"}, {"pods": "1", "requests.cpu": "300m"})
    q2 = quota({"count/pods": "10", "configmaps": "3"}, {"count/pods": "4", "configmaps": "0"}, name="q2")
    q3 = quota({"configmaps": "3"}, {"configmaps": "1"}, name="q3")  # measures nothing a pod uses
    charges = check_request([q1, q2, q3], PODS, pod(), None, now=NOW)
    assert used_after(charges) == [("q1", {"pods": "2", "requests.cpu": "800m"}),
                                   ("q2", {"configmaps": "0", "count/pods": "5"})]


def test_exceeded_message_lists_only_the_exceeded_resources_sorted() -> None:
    full = quota({"pods": "2"}, {"pods": "2"})
    assert refusal([full], pod()) == "exceeded quota: q1, requested: pods=1, used: pods=2, limited: pods=2"
    cpu = quota({"pods": "5", "requests.cpu": "1"}, {"pods": "1", "requests.cpu": "800m"})
    assert refusal([cpu], pod()) == ("exceeded quota: q1, requested: requests.cpu=500m, used: requests.cpu=800m, "
                                     "limited: requests.cpu=1")
    both = quota({"requests.cpu": "1", "pods": "1"}, {"requests.cpu": "1", "pods": "1"})
    assert refusal([both], pod()) == ("exceeded quota: q1, requested: pods=1,requests.cpu=500m, "
                                      "used: pods=1,requests.cpu=1, limited: pods=1,requests.cpu=1")


def test_missing_compute_resources_name_the_containers() -> None:
    q = quota({"limits.cpu": "2", "requests.memory": "1Gi", "pods": "9"}, {"limits.cpu": "0", "requests.memory": "0",
                                                                          "pods": "0"})
    sidecar = {"name": "sidecar", "resources": {"requests": {"memory": "64Mi"}}}
    obj = pod(cpu=None, extra=[sidecar])
    assert refusal([q], obj) == "failed quota: q1: must specify limits.cpu for: app,sidecar; requests.memory for: app"
    ok = pod(memory="64Mi", limits={"cpu": "1"})
    assert used_after(check_request([q], PODS, ok, None, now=NOW)) == [
        ("q1", {"limits.cpu": "1", "pods": "1", "requests.memory": "64Mi"})]


def test_unprocessed_and_unknown_quotas() -> None:
    assert check_request([quota({"pods": "1"}, None, status_hard=False)], PODS, pod(), None, now=NOW) == []
    assert refusal([quota({"pods": "1", "requests.cpu": "1"}, {"pods": "0"})], pod()) == \
        "status unknown for quota: q1, resources: pods,requests.cpu"


def test_scopes_and_scope_selectors() -> None:
    best_effort = quota({"pods": "1"}, {"pods": "1"}, scopes=["BestEffort"])
    assert check_request([best_effort], PODS, pod(), None, now=NOW) == []  # the pod asks for cpu: not BestEffort
    assert "exceeded quota" in refusal([best_effort], pod(cpu=None))
    high = [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
    by_class = quota({"pods": "1"}, {"pods": "0"}, selector=high)
    assert check_request([by_class], PODS, pod(priority="low"), None, now=NOW) == []
    assert used_after(check_request([by_class], PODS, pod(priority="high"), None, now=NOW)) == [("q1", {"pods": "1"})]
    none = quota({"pods": "1"}, {"pods": "0"}, selector=[{"scopeName": "PriorityClass", "operator": "DoesNotExist"}])
    assert used_after(check_request([none], PODS, pod(), None, now=NOW)) == [("q1", {"pods": "1"})]
    services = quota({"services": "1"}, {"services": "0"}, scopes=["NotTerminating"])
    assert check_request([services], SERVICES, {"metadata": {"name": "s"}, "spec": {}}, None, now=NOW) == []


def service(kind: str, ports: int, rv: str = "") -> Obj:
    m: Obj = {"name": "s", "namespace": "ns", **({"resourceVersion": rv} if rv else {})}
    return {"metadata": m, "spec": {"type": kind, "ports": [{"port": 80 + i} for i in range(ports)]}}


def test_service_update_is_charged_by_its_difference() -> None:
    q = quota({"services": "5", "services.nodeports": "2", "services.loadbalancers": "0"},
              {"services": "1", "services.nodeports": "0", "services.loadbalancers": "0"})
    old = service("ClusterIP", 2, rv="3")
    assert used_after(check_request([q], SERVICES, service("NodePort", 2), old, now=NOW)) == [
        ("q1", {"services": "1", "services.loadbalancers": "0", "services.nodeports": "2"})]
    assert refusal([q], service("LoadBalancer", 2), SERVICES, old) == (
        "exceeded quota: q1, requested: services.loadbalancers=1, used: services.loadbalancers=0, "
        "limited: services.loadbalancers=0")
    assert check_request([q], SERVICES, service("ClusterIP", 3), old, now=NOW) == []  # no quota'd change
    assert refusal([q], service("NodePort", 3), SERVICES) == (  # a create is charged in full
        "exceeded quota: q1, requested: services.nodeports=3, used: services.nodeports=0, "
        "limited: services.nodeports=2")


def claim(storage: str, rv: str = "") -> Obj:
    m: Obj = {"name": "c", "namespace": "ns", **({"resourceVersion": rv} if rv else {})}
    return {"metadata": m, "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": storage}}}}


def test_claim_growth_is_charged_by_its_difference() -> None:
    q = quota({"requests.storage": "10Gi", "gold.storageclass.storage.k8s.io/requests.storage": "20Gi"},
              {"requests.storage": "5Gi", "gold.storageclass.storage.k8s.io/requests.storage": "5Gi"})
    grown = check_request([q], PVCS, claim("8Gi"), claim("5Gi", rv="4"), now=NOW)
    assert used_after(grown) == [
        ("q1", {"gold.storageclass.storage.k8s.io/requests.storage": "8Gi", "requests.storage": "8Gi"})]
    assert refusal([q], claim("12Gi"), PVCS, claim("5Gi", rv="4")) == (
        "exceeded quota: q1, requested: requests.storage=7Gi, used: requests.storage=5Gi, "
        "limited: requests.storage=10Gi")


def test_object_counts_and_negative_usage() -> None:
    deployments = evaluator_for(("apps", "deployments"))
    q = quota({"count/deployments.apps": "1", "pods": "3"}, {"count/deployments.apps": "1", "pods": "0"})
    assert refusal([q], {"metadata": {"name": "d"}}, deployments) == (
        "exceeded quota: q1, requested: count/deployments.apps=1, used: count/deployments.apps=1, "
        "limited: count/deployments.apps=1")
    assert not deployments.handles_update and SERVICES.handles_update and not PODS.handles_update
    cpu = quota({"requests.cpu": "4"}, {"requests.cpu": "0"})
    assert refusal([cpu], pod(cpu="-1")) == "quota usage is negative for resource(s): cpu,requests.cpu"


# -- the plugin against a real store --------------------------------------------------------------------
@pytest.fixture
def objects(tmp_path: Path) -> Iterator[ObjectStore]:
    with Store.open(tmp_path / "s", fsync=False) as store:
        yield ObjectStore(store)


async def _put_quota(objects: ObjectStore, q: Obj) -> None:
    body = {**q, "metadata": {k: v for k, v in q["metadata"].items() if k != "resourceVersion"}}
    await objects.create(QUOTA_RT, "ns", body["metadata"]["name"], body)


def _used(objects: ObjectStore, name: str = "q1") -> Obj:
    return objects.get(QUOTA_RT, "ns", name)["status"]["used"]


def test_plugin_charges_refuses_and_skips_dry_run(objects: ObjectStore) -> None:
    plugin = ResourceQuotaAdmission(REG, objects, Lookups(objects), clock=lambda: NOW)

    async def main() -> None:
        await plugin.admit(POD_RT, pod("a"))  # no quota: nothing to do
        await _put_quota(objects, quota({"pods": "2", "requests.cpu": "1"}, {"pods": "0", "requests.cpu": "0"}))
        await plugin.admit(POD_RT, pod("a"))
        assert _used(objects) == {"pods": "1", "requests.cpu": "500m"}
        await plugin.admit(POD_RT, pod("b"), dry_run=True)
        assert _used(objects) == {"pods": "1", "requests.cpu": "500m"}
        await plugin.admit(POD_RT, pod("b", cpu="400m"))
        with pytest.raises(errors.StatusError) as e:
            await plugin.admit(POD_RT, pod("c", cpu="100m"))
        assert (e.value.code, e.value.reason) == (403, "Forbidden")
        assert e.value.message == ('pods "c" is forbidden: exceeded quota: q1, requested: pods=1, used: pods=2, '
                                   'limited: pods=2')
        with pytest.raises(errors.StatusError):  # dryRun checks as well
            await plugin.admit(POD_RT, pod("c", cpu="100m"), dry_run=True)
        assert _used(objects) == {"pods": "2", "requests.cpu": "900m"}
        await plugin.admit(CM_RT, {"metadata": {"name": "cm", "namespace": "ns"}})  # not measured: no write
        assert objects.get(QUOTA_RT, "ns", "q1")["status"]["used"] == {"pods": "2", "requests.cpu": "900m"}

    asyncio.run(main())


class RacingAdmission(ResourceQuotaAdmission):
    """Another writer (the quota controller) changes the quota just before each of the first
    `races` charges."""

    races = 1

    async def _write(self, namespace: str, charge: Charge) -> None:
        if self.races:
            self.races -= 1
            live = self.objects.get(QUOTA_RT, namespace, charge.quota["metadata"]["name"])
            live["status"]["used"]["pods"] = "1"  # a recalculation found one pod more
            await self.objects.replace(QUOTA_RT, namespace, live["metadata"]["name"], live,
                                       expect_revision=int(live["metadata"]["resourceVersion"]))
        await super()._write(namespace, charge)


def test_plugin_retries_a_lost_race_against_the_fresh_quota(objects: ObjectStore) -> None:
    plugin = RacingAdmission(REG, objects, Lookups(objects), clock=lambda: NOW)

    async def main() -> None:
        await _put_quota(objects, quota({"pods": "2"}, {"pods": "0"}))
        await plugin.admit(POD_RT, pod("a"))
        assert _used(objects) == {"pods": "2"}  # charged on top of the controller's value

    asyncio.run(main())


def test_plugin_gives_up_after_four_lost_races(objects: ObjectStore) -> None:
    plugin = RacingAdmission(REG, objects, Lookups(objects), clock=lambda: NOW)
    plugin.races = 10

    async def main() -> None:
        await _put_quota(objects, quota({"pods": "9"}, {"pods": "0"}))
        with pytest.raises(errors.StatusError) as e:
            await plugin.admit(POD_RT, pod("b"))
        assert e.value.code == 409 and plugin.races == 6  # the first attempt and three retries
        assert _used(objects) == {"pods": "1"}  # the other writer's value, nothing of ours

    asyncio.run(main())


def test_concurrent_creates_never_overcommit(objects: ObjectStore) -> None:
    plugin = ResourceQuotaAdmission(REG, objects, Lookups(objects), clock=lambda: NOW)

    async def main() -> None:
        await _put_quota(objects, quota({"pods": "3"}, {"pods": "0"}))
        results = await asyncio.gather(*(plugin.admit(POD_RT, pod(f"p{i}")) for i in range(5)),
                                       return_exceptions=True)
        refused = [r for r in results if isinstance(r, errors.StatusError)]
        assert len(refused) == 2 and all(r.code == 403 for r in refused)
        assert _used(objects) == {"pods": "3"}

    asyncio.run(main())
