"""The Python plugins kubecore ships, by name (the in-tree registry's Python half).

The node-level Filter/Score plugins (NodeResourcesFit, TaintToleration, NodeAffinity, ...) are
native; see `kubecore.scheduler.registry` for how both halves form a profile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubecore.scheduler.plugins import binder, coscheduling, gates, preemption, queuesort, volumebinding

__all__ = ["PluginFactory", "python_plugins"]

PluginFactory = Callable[[Any, Any], object]
"""(args, handle) -> plugin. `args` is the typed args of an in-tree plugin or the raw dict."""


def python_plugins() -> dict[str, PluginFactory]:
    return {
        "PrioritySort": queuesort.new,
        "SchedulingGates": gates.new,
        "DefaultBinder": binder.new,
        "VolumeBinding": volumebinding.new,
        "DefaultPreemption": preemption.new,
        "Coscheduling": coscheduling.new,
    }
