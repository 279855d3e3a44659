"""pods/log and pods/exec in the API server: the container a request is for (upstream's
messages) and where a node's kubelet listens."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.api import errors
from kubecore.apiserver.podstream import kubelet_endpoint, log_container, stream_container

Obj = dict[str, Any]


def pod(*names: str, init: tuple[str, ...] = ()) -> Obj:
    return {"metadata": {"name": "web"}, "spec": {"containers": [{"name": n} for n in names],
                                                  "initContainers": [{"name": n} for n in init]}}


def bad(fn: Any, *args: Any) -> str:
    with pytest.raises(errors.StatusError) as e:
        fn(*args)
    assert (e.value.code, e.value.reason) == (400, "BadRequest")
    return e.value.message


def test_the_only_container_is_chosen_and_a_named_one_must_exist() -> None:
    assert log_container(pod("app"), "") == "app"
    assert log_container(pod("a", "b", init=("i",)), "i") == "i"
    assert bad(log_container, pod("a"), "x") == "container x is not valid for pod web"
    assert stream_container(pod("app"), "") == "app"


def test_several_containers_need_a_name() -> None:
    assert bad(log_container, pod("a", "b", init=("i",)), "") == \
        "a container name must be specified for pod web, choose one of: [i a b]"
    assert bad(stream_container, pod("a", "b", init=("i",)), "") == \
        "a container name must be specified for pod web, choose one of: [a b] or one of the init containers: [i]"
    assert bad(log_container, pod(), "") == "a container name must be specified for pod web"


def test_the_kubelet_endpoint_prefers_the_internal_ip_and_the_reported_port() -> None:
    node: Obj = {"metadata": {"name": "n"}, "status": {
        "addresses": [{"type": "Hostname", "address": "n"}, {"type": "InternalIP", "address": "10.0.0.5"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 12345}}}}
    assert kubelet_endpoint(node) == ("10.0.0.5", 12345)
    node["status"].pop("daemonEndpoints")
    node["status"]["addresses"] = [{"type": "Hostname", "address": "n"}]
    assert kubelet_endpoint(node) == ("n", 10250)
    node["status"]["addresses"] = []
    with pytest.raises(errors.StatusError, match="no preferred addresses found"):
        kubelet_endpoint(node)
