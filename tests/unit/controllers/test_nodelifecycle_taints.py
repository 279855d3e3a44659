"""Taint and toleration rules of the node lifecycle / taint eviction controllers: which NoSchedule
taints a node's conditions call for, taint identity (key + effect), toleration matching and the
shortest tolerationSeconds, and zone keys."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.controllers.nodelifecycle_taints import (
    add_or_update_taint, controller_no_schedule_taints, get_matching_tolerations, min_toleration_time,
    no_schedule_taints_for, remove_taint, taint_set_diff, tolerates_taint, zone_key,
)

Obj = dict[str, Any]
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}


def node(conditions: dict[str, str], *, unschedulable: bool = False, taints: list[Obj] | None = None) -> Obj:
    return {"metadata": {"name": "n"}, "spec": {"unschedulable": unschedulable, "taints": taints or []},
            "status": {"conditions": [{"type": t, "status": s} for t, s in conditions.items()]}}


@pytest.mark.parametrize(("conditions", "unschedulable", "keys"), [
    ({"Ready": "True", "MemoryPressure": "False"}, False, []),
    ({"Ready": "False"}, False, ["node.kubernetes.io/not-ready"]),
    ({"Ready": "Unknown", "MemoryPressure": "Unknown"}, False, ["node.kubernetes.io/unreachable"]),
    ({"Ready": "True", "MemoryPressure": "True", "DiskPressure": "True", "PIDPressure": "True",
      "NetworkUnavailable": "True"}, False,
     ["node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure", "node.kubernetes.io/pid-pressure",
      "node.kubernetes.io/network-unavailable"]),
    ({"Ready": "True"}, True, ["node.kubernetes.io/unschedulable"]),
])
def test_no_schedule_taints_follow_conditions_and_unschedulable(conditions: dict[str, str], unschedulable: bool,
                                                               keys: list[str]) -> None:
    wanted = no_schedule_taints_for(node(conditions, unschedulable=unschedulable))
    assert [t["key"] for t in wanted] == keys
    assert all(t["effect"] == "NoSchedule" for t in wanted)


def test_only_controller_owned_noschedule_taints_are_compared() -> None:
    taints = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
              {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
              {"key": "example.com/dedicated", "effect": "NoSchedule"},
              {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    owned = controller_no_schedule_taints(taints)
    assert owned == [taints[0], taints[3]]
    # the node became Ready and schedulable: both go, the user's taint is not ours to touch
    add, remove = taint_set_diff(no_schedule_taints_for(node({"Ready": "True"})), owned)
    assert add == [] and remove == owned


def test_taint_identity_is_key_and_effect() -> None:
    stamped = {**UNREACHABLE, "timeAdded": "2024-01-02T03:04:05Z"}
    add, remove = taint_set_diff([UNREACHABLE], [stamped])
    assert add == [] and remove == []
    taints, changed = add_or_update_taint([stamped], stamped)
    assert not changed and taints == [stamped]
    taints, changed = add_or_update_taint([stamped], {**UNREACHABLE, "timeAdded": "2024-01-02T03:05:00Z"})
    assert changed and taints == [{**UNREACHABLE, "timeAdded": "2024-01-02T03:05:00Z"}]
    taints, changed = remove_taint([stamped, {"key": "x", "effect": "NoExecute"}], UNREACHABLE)
    assert changed and taints == [{"key": "x", "effect": "NoExecute"}]
    assert remove_taint(taints, UNREACHABLE) == (taints, False)


@pytest.mark.parametrize(("toleration", "tolerated"), [
    ({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}, True),
    ({"key": "node.kubernetes.io/unreachable", "operator": "Exists"}, True),  # any effect
    ({"operator": "Exists"}, True),  # any key
    ({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}, False),
    ({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}, True),  # Equal, both values empty
    ({"key": "node.kubernetes.io/unreachable", "operator": "Equal", "value": "x", "effect": "NoExecute"}, False),
    ({"key": "node.kubernetes.io/unreachable", "operator": "Gt", "effect": "NoExecute"}, False),
])
def test_tolerates_taint(toleration: Obj, tolerated: bool) -> None:
    assert tolerates_taint(toleration, UNREACHABLE) is tolerated


def test_matching_tolerations_need_every_taint_tolerated() -> None:
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    t1 = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 30}
    t2 = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}
    assert get_matching_tolerations([], []) == (True, [])
    assert get_matching_tolerations([UNREACHABLE], []) == (False, [])
    assert get_matching_tolerations([UNREACHABLE, not_ready], [t1]) == (False, [])
    assert get_matching_tolerations([UNREACHABLE, not_ready], [t1, t2]) == (True, [t1, t2])


@pytest.mark.parametrize(("seconds", "expected"), [
    ([], 0.0), ([None], -1.0), ([None, 30], 30.0), ([300, 30], 30.0), ([30, 0], 0.0), ([-5], 0.0),
])
def test_min_toleration_time(seconds: list[int | None], expected: float) -> None:
    tolerations = [{"operator": "Exists"} if s is None else {"operator": "Exists", "tolerationSeconds": s}
                   for s in seconds]
    assert min_toleration_time(tolerations) == expected


def test_zone_key_uses_region_and_zone_labels() -> None:
    def labelled(labels: dict[str, str]) -> Obj:
        return {"metadata": {"labels": labels}}

    assert zone_key(labelled({})) == ""
    assert zone_key(labelled({"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "z"})) \
        == "r:\x00:z"
    assert zone_key(labelled({"failure-domain.beta.kubernetes.io/zone": "old"})) == ":\x00:old"
    # both present: the beta labels win, as upstream's GetZoneKey reads them first
    both = {"failure-domain.beta.kubernetes.io/zone": "old", "topology.kubernetes.io/zone": "new",
            "topology.kubernetes.io/region": "r"}
    assert zone_key(labelled(both)) == "r:\x00:old"
