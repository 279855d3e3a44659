"""Service ClusterIP / NodePort allocation."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from kubecore.api.errors import StatusError
from kubecore.apiserver.allocators import Allocators, reconcile_update


def svc(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


def test_allocates_distinct_addresses_and_ports_in_range() -> None:
    a = Allocators(cidr=ipaddress.IPv4Network("10.0.0.0/29"), node_ports=(30000, 30002))
    got = []
    for i in range(5):  # .2 .. .6: .0 network, .1 reserved for `kubernetes`, .7 broadcast
        s = svc(f"s{i}", type="ClusterIP")
        a.allocate(s)
        got.append(s["spec"]["clusterIP"])
    assert got == [f"10.0.0.{i}" for i in range(2, 7)]
    with pytest.raises(StatusError) as e:
        a.allocate(svc("full"))
    assert e.value.code == 500 and "range is full" in e.value.message
    a.release(svc("s0", clusterIP="10.0.0.2", clusterIPs=["10.0.0.2"]))
    again = svc("again")
    a.allocate(again)
    assert again["spec"]["clusterIP"] == "10.0.0.2"


def test_requested_address_and_port_must_be_free_and_in_range() -> None:
    a = Allocators()
    first = svc("a", clusterIP="10.96.0.10", type="NodePort")
    first["spec"]["ports"][0]["nodePort"] = 30080
    a.allocate(first)
    cases = [
        (svc("b", clusterIP="10.96.0.10"), "provided IP is already allocated"),
        (svc("c", clusterIP="192.168.0.1"), "provided IP is not in the valid range"),
        (svc("d", clusterIP="nope"), "must be a valid IP address"),
    ]
    for s, msg in cases:
        with pytest.raises(StatusError) as e:
            a.allocate(s)
        assert e.value.code == 422 and msg in e.value.message, e.value.message
    dup = svc("e", type="NodePort")
    dup["spec"]["ports"][0]["nodePort"] = 30080
    before = set(a.ips)
    with pytest.raises(StatusError) as e:
        a.allocate(dup)
    assert "spec.ports[0].nodePort" in e.value.message and "already allocated" in e.value.message
    assert a.ips == before, "a failed allocation gives back the address it took"


def test_headless_and_external_name_take_no_address() -> None:
    a = Allocators()
    h = svc("h", clusterIP="None")
    a.allocate(h)
    x = svc("x", type="ExternalName", externalName="example.com")
    a.allocate(x)
    assert h["spec"]["clusterIPs"] == ["None"] and "clusterIP" not in x["spec"] and not a.ips


def test_update_keeps_the_address_and_moves_node_ports() -> None:
    a = Allocators()
    old = svc("s", type="NodePort")
    a.allocate(old)
    port = old["spec"]["ports"][0]["nodePort"]
    new = svc("s", type="ClusterIP")
    change = reconcile_update(a, old, new)
    assert new["spec"]["clusterIP"] == old["spec"]["clusterIP"]
    assert "nodePort" not in new["spec"]["ports"][0]
    assert a.ports == {port}, "nothing is released before the update is stored"
    change.rollback()
    assert a.ports == {port}
    change.commit()
    assert not a.ports
    moved = svc("s", type="NodePort")
    moved["spec"]["ports"][0]["nodePort"] = 30123
    undo = reconcile_update(a, old, moved)
    assert 30123 in a.ports
    undo.rollback()
    assert 30123 not in a.ports, "a failed update gives back the port it took"
    changed = svc("s", clusterIP="10.96.0.99")
    with pytest.raises(StatusError) as e:
        reconcile_update(a, old, changed)
    assert "field is immutable" in e.value.message
