"""DefaultBinder: binds through the `bind` service the wiring provides (upstream plugins/defaultbinder).

The plugin knows nothing of HTTP: `services.bind(pod, node)` is an awaitable supplied by the
caller (for kubecore, a POST of a Binding to pods/<name>/binding). An exception from it becomes
an Error status, so the pod is forgotten and retried after backoff.
"""

from __future__ import annotations

from typing import Any

from kubecore.scheduler.handle import Handle
from kubecore.scheduler.interface import CycleState
from kubecore.scheduler.podinfo import Obj
from kubecore.scheduler.status import Status, as_status

__all__ = ["DefaultBinder"]


class DefaultBinder:
    name = "DefaultBinder"

    def __init__(self, handle: Handle) -> None:
        handle.require("bind", self.name)
        bind = handle.services.bind
        assert bind is not None
        self._bind = bind

    async def bind(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        try:
            await self._bind(pod, node)
        except Exception as e:  # noqa: BLE001 - any failure of the call is the binding's error
            return as_status(e)
        return None


def new(args: Any, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)
