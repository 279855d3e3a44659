"""The controller registry, --controllers selection, duration flags, and the manager's
supervision of controllers (without leader election, with fake controllers and a fake clock)."""

from __future__ import annotations

import argparse
import asyncio

import pytest

from kubecore.cli.controller_manager_cmd import parse_duration
from kubecore.client.clock import FakeClock, settle
from kubecore.client.config import ClientConfig
from kubecore.controllers import manager as manager_mod
from kubecore.controllers.base import (ControllerContext, ControllerSpec, UnknownController, load_builtin_controllers,
                                       select_controllers)
from kubecore.controllers.manager import ControllerManager, ManagerOptions


def spec(name: str, *, default: bool = True, aliases: tuple[str, ...] = ()) -> ControllerSpec:
    return ControllerSpec(name=name, constructor=lambda ctx: None,  # type: ignore[arg-type,return-value]
                          enabled_by_default=default, aliases=aliases)


REG = {s.name: s for s in (spec("garbagecollector", aliases=("gc",)), spec("namespace"),
                           spec("bootstrapsigner", default=False))}


def names(flags: list[str]) -> list[str]:
    return [s.name for s in select_controllers(flags, REG)]


def test_controller_selection_follows_kube_controller_manager() -> None:
    assert names(["*"]) == ["garbagecollector", "namespace"]
    assert names(["*,-namespace"]) == ["garbagecollector"]
    assert names(["*", "bootstrapsigner"]) == ["garbagecollector", "namespace", "bootstrapsigner"]
    assert names(["gc"]) == ["garbagecollector"]
    assert names(["namespace,-gc"]) == ["namespace"]
    with pytest.raises(UnknownController):
        names(["nope"])


def test_builtin_controllers_are_registered() -> None:
    reg = load_builtin_controllers()
    assert {"garbagecollector", "namespace"} <= set(reg)
    assert reg["garbagecollector"].workers == 20 and "gc" in reg["garbagecollector"].aliases


@pytest.mark.parametrize("text,seconds", [("15s", 15.0), ("500ms", 0.5), ("1m30s", 90.0), ("2", 2.0), ("0.25", 0.25)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "15x", "s", "1s2"])
def test_parse_duration_rejects_garbage(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)


class Flaky:
    """Crashes on its first run, then runs until cancelled."""

    runs: list[int] = []
    cancelled = 0

    def __init__(self, ctx: ControllerContext) -> None:
        self.name = "flaky"
        self.ctx = ctx

    async def run(self, workers: int) -> None:
        Flaky.runs.append(workers)
        if len(Flaky.runs) == 1:
            raise RuntimeError("first run fails")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            Flaky.cancelled += 1
            raise


async def test_manager_restarts_a_crashed_controller_and_stops_on_cancel() -> None:
    clock = FakeClock()
    Flaky.runs, Flaky.cancelled = [], 0
    reg = {"flaky": ControllerSpec(name="flaky", constructor=Flaky, workers=3)}
    m = ControllerManager(ClientConfig(server="http://127.0.0.1:1"), clock=clock, registry=reg,
                          options=ManagerOptions(leader_elect=False, workers={"flaky": 7}))
    task = asyncio.ensure_future(m.run())
    await settle()
    assert Flaky.runs == [7] and m.leading.is_set()
    await clock.step(manager_mod.RESTART_PAUSE)
    assert Flaky.runs == [7, 7]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert Flaky.cancelled == 1 and not m.leading.is_set()


def test_unknown_controller_is_rejected_up_front() -> None:
    with pytest.raises(UnknownController):
        ControllerManager(ClientConfig(server="http://127.0.0.1:1"), registry=REG,
                          options=ManagerOptions(controllers=["wat"]))
