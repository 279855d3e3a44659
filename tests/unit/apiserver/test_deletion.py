"""Table tests of the delete decision (kubecore.apiserver.deletion), with an injected clock."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kubecore.api import errors
from kubecore.api.registry import builtin_registry
from kubecore.apiserver import deletion, namespaces
from kubecore.apiserver.deletion import DeleteOptions

NOW = dt.datetime(2026, 12, 2, 12, 0, 0, tzinfo=dt.timezone.utc)
REG = builtin_registry()
PODS = REG.get("", "v1", "pods")
CMS = REG.get("", "v1", "configmaps")
DEPLOY = REG.get("apps", "v1", "deployments")
JOBS = REG.get("batch", "v1", "jobs")
RCS = REG.get("", "v1", "replicationcontrollers")
NS = REG.get("", "v1", "namespaces")


def obj(**meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x", "uid": "u1", "resourceVersion": "7", **meta}, "spec": {}}


def bound_pod(**meta: Any) -> dict[str, Any]:
    p = obj(**meta)
    p["spec"] = {"nodeName": "n1", "terminationGracePeriodSeconds": 30}
    return p


@pytest.mark.parametrize(("rt", "before", "opts", "action", "finalizers"), [
    (CMS, obj(), DeleteOptions(), "remove", None),
    (CMS, obj(finalizers=["a/b"]), DeleteOptions(), "mark", ["a/b"]),
    (CMS, obj(), DeleteOptions(propagation="Orphan"), "mark", ["orphan"]),
    (DEPLOY, obj(), DeleteOptions(propagation="Foreground"), "mark", ["foregroundDeletion"]),
    (DEPLOY, obj(), DeleteOptions(), "remove", None),
    (JOBS, obj(), DeleteOptions(), "mark", ["orphan"]),  # batch/v1 orphans by default
    (RCS, obj(), DeleteOptions(), "mark", ["orphan"]),  # so does core/v1 RC
    (JOBS, obj(), DeleteOptions(propagation="Background"), "remove", None),
    (CMS, obj(finalizers=["orphan"]), DeleteOptions(propagation="Background"), "remove", None),
    (CMS, obj(finalizers=["orphan"]), DeleteOptions(orphan_dependents=False), "remove", None),
    (CMS, obj(finalizers=["foregroundDeletion"]), DeleteOptions(propagation="Orphan"), "mark", ["orphan"]),
    (PODS, obj(), DeleteOptions(), "remove", None),  # never scheduled: no grace
    (PODS, bound_pod(), DeleteOptions(grace_period=0), "remove", None),
])
def test_plan(rt: Any, before: dict[str, Any], opts: DeleteOptions, action: str, finalizers: list[str] | None) -> None:
    out = deletion.plan(rt, before, opts, now=NOW)
    assert out.action == action
    if action == "mark":
        m = out.obj["metadata"]
        assert m.get("finalizers") == finalizers
        assert m["deletionTimestamp"] == "2026-12-02T12:00:00Z" and m["deletionGracePeriodSeconds"] == 0
    assert before["metadata"].get("deletionTimestamp") is None  # the input is never modified


def test_graceful_pod_deletion_and_shortening() -> None:
    out = deletion.plan(PODS, bound_pod(generation=1), DeleteOptions(), now=NOW)
    m = out.obj["metadata"]
    assert out.action == "mark" and m["deletionTimestamp"] == "2026-12-02T12:00:30Z"
    assert m["deletionGracePeriodSeconds"] == 30 and m["generation"] == 2
    later = NOW + dt.timedelta(seconds=10)
    assert deletion.plan(PODS, out.obj, DeleteOptions(grace_period=40), now=later).action == "pending"
    assert deletion.plan(PODS, out.obj, DeleteOptions(), now=later).action == "pending"
    short = deletion.plan(PODS, out.obj, DeleteOptions(grace_period=5), now=later)
    assert short.obj["metadata"]["deletionTimestamp"] == "2026-12-02T12:00:05Z"
    assert short.obj["metadata"]["deletionGracePeriodSeconds"] == 5 and short.obj["metadata"]["generation"] == 2


def test_negative_grace_is_one_second_and_finished_pods_go_at_once() -> None:
    out = deletion.plan(PODS, bound_pod(), DeleteOptions(grace_period=-5), now=NOW)
    assert out.obj["metadata"]["deletionGracePeriodSeconds"] == 1
    done = bound_pod()
    done["status"] = {"phase": "Succeeded"}
    assert deletion.plan(PODS, done, DeleteOptions(), now=NOW).action == "remove"


def test_marking_twice_changes_nothing() -> None:
    first = deletion.plan(CMS, obj(finalizers=["a/b"]), DeleteOptions(), now=NOW).obj
    again = deletion.plan(CMS, first, DeleteOptions(), now=NOW + dt.timedelta(seconds=9))
    assert again.action == "pending" and again.obj == first


def test_preconditions() -> None:
    with pytest.raises(errors.StatusError) as e:
        deletion.plan(DEPLOY, obj(), DeleteOptions(resource_version="6"), now=NOW)
    assert e.value.code == 409
    assert e.value.message == ('Operation cannot be fulfilled on Deployment.apps "x": the ResourceVersion in the '
                               "precondition (6) does not match the ResourceVersion in record (7). The object might have been modified")


@pytest.mark.parametrize(("body", "query", "message"), [
    ({"propagationPolicy": "Nope"}, {}, 'propagationPolicy: Unsupported value: "Nope"'),
    ({"propagationPolicy": "Orphan", "orphanDependents": True}, {}, "cannot be both set"),
    ({}, {"gracePeriodSeconds": "soon"}, "invalid gracePeriodSeconds"),
])
def test_bad_options(body: dict[str, Any], query: dict[str, str], message: str) -> None:
    with pytest.raises(errors.StatusError) as e:
        deletion.parse_options(body, query)
    assert message in e.value.message


def test_removed_response() -> None:
    o = obj()
    assert deletion.removed_response(PODS, o) is o
    st = deletion.removed_response(DEPLOY, o)
    assert st["details"] == {"name": "x", "group": "apps", "kind": "deployments", "uid": "u1"}


def test_should_delete_during_update() -> None:
    old = obj(deletionTimestamp="2026-12-02T12:00:00Z", deletionGracePeriodSeconds=0, finalizers=["a/b"])
    new = obj(deletionTimestamp="2026-12-02T12:00:00Z")
    assert deletion.should_delete_during_update(CMS, old, new)
    assert not deletion.should_delete_during_update(CMS, obj(finalizers=["a/b"]), obj())
    graceful = obj(deletionTimestamp="2026-12-02T12:00:30Z", deletionGracePeriodSeconds=30, finalizers=["a/b"])
    assert not deletion.should_delete_during_update(PODS, graceful, obj())
    ns_old = {**obj(deletionTimestamp="2026-12-02T12:00:00Z"), "spec": {"finalizers": ["kubernetes"]}}
    assert not deletion.should_delete_during_update(NS, ns_old, ns_old)
    assert deletion.should_delete_during_update(NS, ns_old, {**ns_old, "spec": {"finalizers": []}})


def test_namespace_delete() -> None:
    ns = {"metadata": {"name": "n", "uid": "u", "resourceVersion": "3"}, "spec": {"finalizers": ["kubernetes"]},
          "status": {"phase": "Active"}}
    first = namespaces.plan_delete(NS, ns, DeleteOptions(), now=NOW)
    assert first.action == "mark" and first.obj["status"]["phase"] == "Terminating"
    with pytest.raises(errors.StatusError) as e:
        namespaces.plan_delete(NS, first.obj, DeleteOptions(), now=NOW)
    assert e.value.code == 409
    finalized = {**first.obj, "spec": {}}
    assert namespaces.plan_delete(NS, finalized, DeleteOptions(), now=NOW).action == "remove"
