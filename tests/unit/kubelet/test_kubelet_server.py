"""The kubelet server's decisions, without a server: which container's log a request reads
(validateContainerLogStatus, upstream's messages) and the streaming flags."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import MultiDict

from kubecore.kubelet.server import LogError, container_spec, log_container_id, stream_flags

Obj = dict[str, Any]


def status(state: Obj, last: Obj | None = None, cid: str = "sim://new") -> Obj:
    cs: Obj = {"name": "app", "state": state, "containerID": cid}
    if last is not None:
        cs["lastState"] = {"terminated": last}
    return {"containerStatuses": [cs]}


def refused(st: Obj, *, previous: bool = False, container: str = "app") -> str:
    with pytest.raises(LogError) as e:
        log_container_id(st, container, "web", previous=previous)
    assert e.value.status == 400
    return str(e.value)


def test_a_running_container_reads_its_own_log_and_previous_the_last_one() -> None:
    st = status({"running": {}}, last={"containerID": "sim://old", "exitCode": 1})
    assert log_container_id(st, "app", "web", previous=False) == "sim://new"
    assert log_container_id(st, "app", "web", previous=True) == "sim://old"


def test_terminated_and_crash_looping_containers_read_the_last_log() -> None:
    done = status({"terminated": {"containerID": "sim://t"}})
    assert log_container_id(done, "app", "web", previous=False) == "sim://t"
    looping = status({"waiting": {"reason": "CrashLoopBackOff"}}, last={"containerID": "sim://old"})
    assert log_container_id(looping, "app", "web", previous=False) == "sim://old"


def test_containers_without_a_log_get_upstream_messages() -> None:
    assert refused(status({"running": {}}), previous=True) == \
        'previous terminated container "app" in pod "web" not found'
    assert refused(status({"waiting": {"reason": "ContainerCreating"}})) == \
        'container "app" in pod "web" is waiting to start: ContainerCreating'
    assert refused(status({"waiting": {"reason": "ImagePullBackOff"}})) == \
        'container "app" in pod "web" is waiting to start: trying and failing to pull image'
    assert refused(status({"waiting": {"reason": "ErrImagePull"}})) == \
        'container "app" in pod "web" is waiting to start: image can\'t be pulled'
    assert refused(status({})) == 'container "app" in pod "web" is waiting to start - no logs yet'
    assert refused(status({"running": {}}), container="other") == 'container "other" in pod "web" is not available'


def test_container_spec_finds_init_and_ephemeral_containers() -> None:
    pod = {"spec": {"containers": [{"name": "a"}], "initContainers": [{"name": "i"}],
                    "ephemeralContainers": [{"name": "e"}]}}
    assert [container_spec(pod, n) is not None for n in ("a", "i", "e", "x")] == [True, True, True, False]


def test_stream_flags_need_one_stream_and_a_tty_has_no_stderr() -> None:
    assert stream_flags(MultiDict(input="1", output="1", error="1", tty="1")) == (True, True, False, True)
    assert stream_flags(MultiDict(output="1")) == (False, True, False, False)
    with pytest.raises(LogError, match="you must specify at least 1 of stdin, stdout, stderr"):
        stream_flags(MultiDict(tty="1"))
