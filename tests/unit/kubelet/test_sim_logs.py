"""Log files of simulated containers: written only for pods that ask, in CRI's format, at the
path the runtime reports; streaming calls answer Unimplemented."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubecore.api.podlogoptions import LogOptions
from kubecore.client.clock import FakeClock
from kubecore.kubelet import cri, runtime_config
from kubecore.kubelet.crilog import messages_of, read_messages
from kubecore.kubelet.sim.runtime import SimRuntime
from kubecore.kubelet.timers import Timers
from tests.unit.kubelet.kubelet_fixtures import container, make_pod


async def started(runtime: SimRuntime, pod: dict[str, object], *, attempt: int = 0) -> str:
    sandbox = runtime_config.sandbox_config(pod, 0)
    sid = await runtime.run_pod_sandbox(sandbox)
    spec = pod["spec"]["containers"][0]  # type: ignore[index]
    ref = await runtime.pull_image(cri.ImageSpec(image=spec["image"]), None, sandbox)
    config = runtime_config.container_config(pod, spec, restart_count=attempt, image_ref=ref)
    cid = await runtime.create_container(sid, config, sandbox)
    await runtime.start_container(cid)
    return cid


def runtime_in(tmp_path: Path) -> tuple[SimRuntime, FakeClock]:
    clock = FakeClock()
    timers = Timers(clock)
    timers.start()
    return SimRuntime(clock=clock, timers=timers, pod_cidr="10.128.0.0/24", log_root=str(tmp_path)), clock


async def test_a_pod_without_the_annotation_writes_nothing(tmp_path: Path) -> None:
    runtime, _ = runtime_in(tmp_path)
    cid = await started(runtime, make_pod())
    status = (await runtime.container_status(cid)).status
    assert status.log_path.startswith(str(tmp_path)) and status.log_path.endswith("/app/0.log")
    assert list(tmp_path.iterdir()) == []


async def test_annotated_lines_are_written_as_cri_records_and_removed_with_the_container(tmp_path: Path) -> None:
    runtime, clock = runtime_in(tmp_path)
    pod = make_pod(annotations={"sim.kubecore.io/log": "hi {container} #{attempt}\nbye {pod}"},
                   containers=[container()])
    cid = await started(runtime, pod, attempt=2)
    path = (await runtime.container_status(cid)).status.log_path
    msgs = messages_of(Path(path).read_bytes().splitlines(keepends=True))
    assert [(m.stream, m.text, m.time) for m in msgs] == [("stdout", b"hi app #2\n", clock.now()),
                                                          ("stdout", b"bye default/web\n", clock.now())]
    out = b"".join([c async for c in read_messages(path, LogOptions(tail_lines=1), now=clock.now())])
    assert out == b"bye default/web\n"
    await runtime.remove_container(cid)
    assert not Path(path).exists()


async def test_log_every_repeats_the_lines_while_the_container_runs(tmp_path: Path) -> None:
    runtime, clock = runtime_in(tmp_path)
    pod = make_pod(annotations={"sim.kubecore.io/log": "tick", "sim.kubecore.io/log-every": "1s"})
    cid = await started(runtime, pod)
    path = Path((await runtime.container_status(cid)).status.log_path)
    for _ in range(2):
        await clock.step(1.0)
    assert len(path.read_bytes().splitlines()) == 3
    await runtime.stop_container(cid, 0)
    for _ in range(3):
        await clock.step(1.0)
    assert len(path.read_bytes().splitlines()) == 3


@pytest.mark.parametrize("call", ["exec", "attach", "port_forward"])
async def test_streaming_calls_are_unimplemented(tmp_path: Path, call: str) -> None:
    runtime, _ = runtime_in(tmp_path)
    cid = await started(runtime, make_pod())
    with pytest.raises(cri.Unimplemented, match="runs no processes"):
        if call == "exec":
            await runtime.exec(cid, ["ls"])
        elif call == "attach":
            await runtime.attach(cid)
        else:
            await runtime.port_forward("sandbox", [80])
