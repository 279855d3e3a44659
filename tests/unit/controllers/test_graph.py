"""The dependency graph as a state machine: events in, graph + queued nodes out
(the worked example of kubecore.controllers.graph's docstring, then the edge cases)."""

from __future__ import annotations

from typing import Any

from kubecore.controllers.graph import (AbsentOwnerCache, GraphBuilder, GraphEvent, Identity, Node, ObjectState,
                                        OwnerRef, references_diff)


class Recorder:
    def __init__(self) -> None:
        self.delete: list[Node] = []
        self.orphan: list[Node] = []
        self.invalid: list[tuple[Node, str]] = []
        self.graph = GraphBuilder(attempt_to_delete=self.delete.append, attempt_to_orphan=self.orphan.append,
                                  invalid_owner_namespace=lambda n, uid: self.invalid.append((n, uid)))

    def names(self, which: str = "delete") -> list[str]:
        nodes: list[Node] = getattr(self, which)
        return [n.identity.name for n in nodes]

    def clear(self) -> None:
        self.delete.clear()
        self.orphan.clear()


def obj(kind: str, name: str, uid: str, *, ns: str = "a", owners: list[dict[str, Any]] | None = None,
        deleting: bool = False, finalizers: list[str] | None = None, api_version: str = "v1") -> ObjectState:
    meta: dict[str, Any] = {"name": name, "uid": uid}
    if ns:
        meta["namespace"] = ns
    if owners:
        meta["ownerReferences"] = owners
    if deleting:
        meta["deletionTimestamp"] = "2024-01-02T03:04:05Z"
    if finalizers:
        meta["finalizers"] = finalizers
    return ObjectState.from_object({"metadata": meta}, api_version=api_version, kind=kind)


def ref(kind: str, name: str, uid: str, *, block: bool = False, api_version: str = "v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "blockOwnerDeletion": block}


RS = ref("ReplicaSet", "r", "r-uid", block=True, api_version="apps/v1")


def test_worked_example() -> None:
    rec = Recorder()
    g = rec.graph
    pod = obj("Pod", "p", "p-uid", owners=[RS])
    g.process(GraphEvent("add", pod))
    owner = g.nodes["r-uid"]
    assert owner.virtual and owner.identity == Identity("apps/v1", "ReplicaSet", "r", "r-uid", "a")
    assert {d.identity.name for d in owner.dependents} == {"p"}
    assert rec.names() == ["r"]  # verify the virtual owner
    rec.clear()

    rs = obj("ReplicaSet", "r", "r-uid", api_version="apps/v1")
    g.process(GraphEvent("add", rs))
    assert g.nodes["r-uid"] is owner and owner.observed and rec.delete == []

    deleting = obj("ReplicaSet", "r", "r-uid", api_version="apps/v1", deleting=True, finalizers=["foregroundDeletion"])
    g.process(GraphEvent("update", deleting, old=rs))
    assert owner.deleting_dependents and owner.being_deleted
    assert sorted(rec.names()) == ["p", "r"]
    assert [n.identity.name for n in owner.blocking_dependents()] == ["p"]
    rec.clear()

    g.process(GraphEvent("delete", pod))
    assert "p-uid" not in g.nodes and owner.dependents == set()
    assert rec.names() == ["r"]  # the owner may be unblocked now
    rec.clear()

    g.process(GraphEvent("delete", deleting))
    assert g.nodes == {} and rec.delete == []


def test_orphan_transition_happens_once() -> None:
    rec = Recorder()
    live = obj("ConfigMap", "o", "o-uid")
    rec.graph.process(GraphEvent("add", live))
    marked = obj("ConfigMap", "o", "o-uid", deleting=True, finalizers=["orphan"])
    rec.graph.process(GraphEvent("update", marked, old=live))
    rec.graph.process(GraphEvent("update", marked, old=marked))  # a resync: no new transition
    assert rec.names("orphan") == ["o"]


def test_object_first_seen_while_being_deleted_transitions() -> None:
    rec = Recorder()
    rec.graph.process(GraphEvent("add", obj("ConfigMap", "o", "o-uid", deleting=True, finalizers=["orphan"])))
    assert rec.names("orphan") == ["o"]
    rec.graph.process(GraphEvent("add", obj("ConfigMap", "f", "f-uid", deleting=True,
                                            finalizers=["foregroundDeletion"])))
    assert rec.graph.nodes["f-uid"].deleting_dependents and rec.names() == ["f"]


def test_deleting_an_owner_queues_its_dependents_and_remembers_it_absent() -> None:
    rec = Recorder()
    g = rec.graph
    owner = obj("ConfigMap", "o", "o-uid")
    g.process(GraphEvent("add", owner))
    for n in ("d1", "d2"):
        g.process(GraphEvent("add", obj("ConfigMap", n, f"{n}-uid", owners=[ref("ConfigMap", "o", "o-uid")])))
    rec.clear()
    g.process(GraphEvent("delete", owner))
    assert sorted(rec.names()) == ["d1", "d2"]
    assert owner.identity in g.absent


def test_owner_reference_changes_move_the_dependent() -> None:
    rec = Recorder()
    g = rec.graph
    for n in ("o1", "o2"):
        g.process(GraphEvent("add", obj("ConfigMap", n, f"{n}-uid")))
    d1 = obj("ConfigMap", "d", "d-uid", owners=[ref("ConfigMap", "o1", "o1-uid", block=True)])
    g.process(GraphEvent("add", d1))
    g.nodes["o1-uid"].deleting_dependents = True
    rec.clear()
    d2 = obj("ConfigMap", "d", "d-uid", owners=[ref("ConfigMap", "o2", "o2-uid")])
    g.process(GraphEvent("update", d2, old=d1))
    assert g.nodes["o1-uid"].dependents == set()
    assert {n.identity.name for n in g.nodes["o2-uid"].dependents} == {"d"}
    assert rec.names() == ["o1"]  # its blocking dependent left: o1 may finish now


def test_unblocking_a_reference_wakes_the_waiting_owner() -> None:
    rec = Recorder()
    g = rec.graph
    g.process(GraphEvent("add", obj("ConfigMap", "o", "o-uid", deleting=True, finalizers=["foregroundDeletion"])))
    blocked = obj("ConfigMap", "d", "d-uid", owners=[ref("ConfigMap", "o", "o-uid", block=True)])
    g.process(GraphEvent("add", blocked))
    rec.clear()
    unblocked = obj("ConfigMap", "d", "d-uid", owners=[ref("ConfigMap", "o", "o-uid", block=False)])
    g.process(GraphEvent("update", unblocked, old=blocked))
    assert rec.names() == ["o"]
    assert g.nodes["o-uid"].blocking_dependents() == []


def test_cluster_scoped_owner_observed_after_its_namespaced_dependent() -> None:
    rec = Recorder()
    g = rec.graph
    cr = ref("ClusterRole", "admin", "cr-uid", api_version="rbac.authorization.k8s.io/v1")
    g.process(GraphEvent("add", obj("ConfigMap", "d", "d-uid", owners=[cr])))
    assert g.nodes["cr-uid"].identity.namespace == "a"  # virtual: the dependent's namespace
    rec.clear()
    g.process(GraphEvent("add", obj("ClusterRole", "admin", "cr-uid", ns="",
                                    api_version="rbac.authorization.k8s.io/v1")))
    node = g.nodes["cr-uid"]
    assert node.observed and node.identity.namespace == "" and rec.delete == [] and rec.invalid == []


def test_owner_in_another_namespace_is_reported() -> None:
    rec = Recorder()
    g = rec.graph
    g.process(GraphEvent("add", obj("ConfigMap", "o", "o-uid", ns="b")))
    g.process(GraphEvent("add", obj("ConfigMap", "d", "d-uid", ns="a", owners=[ref("ConfigMap", "o", "o-uid")])))
    assert [(n.identity.name, uid) for n, uid in rec.invalid] == [("d", "o-uid")]
    assert rec.names() == ["d"]


def test_virtual_delete_of_a_virtual_owner_drops_it() -> None:
    rec = Recorder()
    g = rec.graph
    g.process(GraphEvent("add", obj("ConfigMap", "d", "d-uid", owners=[ref("ConfigMap", "ghost", "g-uid")])))
    ghost = g.nodes["g-uid"]
    rec.clear()
    g.process(GraphEvent("delete", ObjectState(ghost.identity), virtual=True))
    assert "g-uid" not in g.nodes and rec.names() == ["d"]
    assert ghost.identity in g.absent


def test_virtual_delete_does_not_drop_an_observed_object_seen_by_other_coordinates() -> None:
    rec = Recorder()
    g = rec.graph
    g.process(GraphEvent("add", obj("ConfigMap", "o", "o-uid")))
    wrong = Identity("v1", "Secret", "o", "o-uid", "a")
    g.process(GraphEvent("add", obj("ConfigMap", "d", "d-uid", owners=[ref("Secret", "o", "o-uid")])))
    rec.clear()
    g.process(GraphEvent("delete", ObjectState(wrong), virtual=True))
    assert "o-uid" in g.nodes and rec.names() == ["d"]


def test_references_diff() -> None:
    a, b = OwnerRef("v1", "K", "a", "1"), OwnerRef("v1", "K", "b", "2")
    b2 = OwnerRef("v1", "K", "b", "2", block_owner_deletion=True)
    c = OwnerRef("v1", "K", "c", "3")
    assert references_diff((a, b), (b2, c)) == ([c], [a], [(b, b2)])


def test_absent_cache_is_bounded() -> None:
    cache = AbsentOwnerCache(size=2)
    ids = [Identity("v1", "K", str(i), str(i)) for i in range(3)]
    for i in ids:
        cache.add(i)
    assert ids[0] not in cache and ids[1] in cache and ids[2] in cache


def test_nodes_stay_small_shared_references_and_dependent_sets_only_while_needed() -> None:
    rec = Recorder()
    g = rec.graph
    g.process(GraphEvent("add", obj("ReplicaSet", "r", "r-uid", api_version="apps/v1")))
    for n in ("p1", "p2"):
        g.process(GraphEvent("add", obj("Pod", n, f"{n}-uid", owners=[RS])))
    p1, p2, owner = g.nodes["p1-uid"], g.nodes["p2-uid"], g.nodes["r-uid"]
    assert p1.owners[0] is p2.owners[0]  # equal references are one object
    assert p1.identity.namespace is p2.identity.namespace and p1.identity.kind is p2.identity.kind
    assert not hasattr(p1.identity, "__dict__") and not hasattr(p1.owners[0], "__dict__")
    assert p1._dependents is None and p1.dependents == set()  # no set for a node nobody owns
    for n in ("p1", "p2"):
        g.process(GraphEvent("delete", obj("Pod", n, f"{n}-uid", owners=[RS])))
    assert owner.dependents == set() and owner._dependents is None  # dropped with the last dependent
    del p1, p2
    rec.clear()
    assert len(g._refs) == 0  # a reference no node holds any more is forgotten
