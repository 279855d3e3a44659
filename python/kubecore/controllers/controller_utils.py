"""Helpers every workload controller needs (upstream pkg/controller/controller_utils.go and
pkg/api/v1/pod, reduced to what a controller reads from cached objects).

Objects are the plain dicts the informer cache hands out; nothing here mutates them.

- Pod predicates: `is_pod_active` (not Succeeded/Failed, not terminating), `is_pod_ready`
  (condition Ready=True), `pod_ready_time`, `is_pod_available` (ready for at least
  minReadySeconds), `max_container_restarts`, `pod_deletion_cost`.
- Owners: `get_controller_of` (the ownerReference with controller=true), `new_controller_ref`.
- Label selectors: `Selector` compiles a metav1.LabelSelector (`selector_from_label_selector`,
  upstream's LabelSelectorAsSelector: a missing selector matches nothing, an empty one matches
  everything) or a plain label map (`selector_from_set`, for ReplicationControllers).
- Time: `parse_time` / `format_time` for RFC 3339 timestamps (seconds since the epoch as floats,
  the unit of `kubecore.client.clock.Clock`).
- `slow_start_batch`: run an async function `count` times in batches 1, 2, 4, ... that stop at
  the first batch with an error (upstream's slowStartBatch).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from kubecore.client.indexer import NAMESPACE_INDEX, Indexer

Obj = dict[str, Any]

SLOW_START_INITIAL_BATCH_SIZE = 1
"""The first batch of a slow start (upstream's SlowStartInitialBatchSize)."""
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
"""Annotation: pods with a lower cost are deleted first (upstream's PodDeletionCost)."""
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"

_PHASE_SUCCEEDED, _PHASE_FAILED = "Succeeded", "Failed"


# -- time ---------------------------------------------------------------------------------------
_TIME_CACHE: dict[str, float | None] = {}


def parse_time(value: Any) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch; None for missing or unparseable values."""
    if not isinstance(value, str) or not value:
        return None
    if value in _TIME_CACHE:
        return _TIME_CACHE[value]
    try:
        parsed: float | None = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        parsed = None
    if len(_TIME_CACHE) > 4096:
        _TIME_CACHE.clear()
    _TIME_CACHE[value] = parsed
    return parsed


def format_time(t: float) -> str:
    """Seconds since the epoch as RFC 3339 with whole seconds (metav1.Time's wire form)."""
    return datetime.fromtimestamp(math.floor(t), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- small accessors ----------------------------------------------------------------------------
def meta(obj: Obj) -> Obj:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def labels_of(obj: Obj) -> dict[str, str]:
    labels = meta(obj).get("labels")
    return labels if isinstance(labels, dict) else {}


def object_key(obj: Obj) -> str:
    """"<namespace>/<name>" (upstream's KeyFunc and PodKey)."""
    m = meta(obj)
    ns = m.get("namespace")
    return f"{ns}/{m.get('name', '')}" if ns else str(m.get("name", ""))


# -- pods -----------------------------------------------------------------------------------------
def _status(pod: Obj) -> Obj:
    s = pod.get("status")
    return s if isinstance(s, dict) else {}


def pod_phase(pod: Obj) -> str:
    return str(_status(pod).get("phase") or "")


def node_name(pod: Obj) -> str:
    spec = pod.get("spec")
    return str(spec.get("nodeName") or "") if isinstance(spec, dict) else ""


def is_pod_active(pod: Obj) -> bool:
    """Not finished (Succeeded/Failed) and not being deleted (upstream's IsPodActive)."""
    return pod_phase(pod) not in (_PHASE_SUCCEEDED, _PHASE_FAILED) and not meta(pod).get("deletionTimestamp")


def filter_active_pods(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if is_pod_active(p)]


def _ready_condition(pod: Obj) -> Obj | None:
    for c in _status(pod).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "Ready":
            return c
    return None


def is_pod_ready(pod: Obj) -> bool:
    c = _ready_condition(pod)
    return c is not None and c.get("status") == "True"


def pod_ready_time(pod: Obj) -> float | None:
    """When the pod last became Ready (None when not ready or unknown: upstream's zero time)."""
    c = _ready_condition(pod)
    if c is None or c.get("status") != "True":
        return None
    return parse_time(c.get("lastTransitionTime"))


def is_pod_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    """Ready, and (with minReadySeconds) ready for longer than that (upstream's IsPodAvailable)."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = pod_ready_time(pod)
    return since is not None and since + min_ready_seconds < now


def max_container_restarts(pod: Obj) -> int:
    counts = [int(c.get("restartCount") or 0) for c in _status(pod).get("containerStatuses") or ()
              if isinstance(c, dict)]
    return max(counts, default=0)


def pod_deletion_cost(pod: Obj) -> int:
    """The pod-deletion-cost annotation as an int32 (0 when absent or malformed)."""
    annotations = meta(pod).get("annotations") or {}
    raw = annotations.get(POD_DELETION_COST) if isinstance(annotations, dict) else None
    if raw is None:
        return 0
    try:
        cost = int(str(raw).strip())
    except ValueError:
        return 0
    return cost if -(2**31) <= cost < 2**31 else 0


# -- owners ---------------------------------------------------------------------------------------
def get_controller_of(obj: Obj) -> Obj | None:
    """The ownerReference with controller=true, if any (metav1.GetControllerOf)."""
    for ref in meta(obj).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


CONTROLLER_UID_INDEX = "controllerUID"


def controller_uid_index(obj: Obj) -> list[str]:
    """Index function: the UID of the object's controller (none when it has no controller)."""
    ref = get_controller_of(obj)
    return [str(ref.get("uid"))] if ref is not None and ref.get("uid") else []


OWNER_INDEX = "namespaceOwner"


def namespace_owner_index(obj: Obj) -> list[str]:
    """Index function: "<namespace>/<uid of the controlling owner>", "<namespace>/" for an object
    with no controller. A controller's objects plus its namespace's orphans are all a claim can
    touch, so it reads those two index values instead of the whole namespace."""
    m = meta(obj)
    namespace = m.get("namespace") or ""
    ref = get_controller_of(obj)
    return [f"{namespace}/{ref.get('uid') or ''}" if ref is not None else f"{namespace}/"]


def new_controller_ref(owner: Obj, *, api_version: str, kind: str) -> Obj:
    """An ownerReference making `owner` the controller, blocking its deletion (NewControllerRef)."""
    m = meta(owner)
    return {"apiVersion": api_version, "kind": kind, "name": m.get("name", ""), "uid": m.get("uid", ""),
            "controller": True, "blockOwnerDeletion": True}


def has_status_cause(err: BaseException, cause_type: str) -> bool:
    """Whether an API error's Status lists a cause of `cause_type` (apierrors.HasStatusCause)."""
    details = getattr(err, "details", None)
    causes = details.get("causes") if isinstance(details, dict) else None
    return any(isinstance(c, dict) and c.get("type") == cause_type for c in causes or ())


# -- selectors ------------------------------------------------------------------------------------
class InvalidSelector(ValueError):
    """A label selector that cannot be compiled (unknown operator, missing or extra values)."""


Requirement = tuple[str, str, frozenset[str]]
"""(key, operator, values): operator is one of "in", "notin", "exists", "!"."""


class Selector:
    """A compiled label selector. Invariant: `nothing` selectors match no label set at all."""

    __slots__ = ("requirements", "nothing")

    def __init__(self, requirements: list[Requirement], *, nothing: bool = False) -> None:
        self.requirements = tuple(sorted(requirements))
        self.nothing = nothing

    @property
    def empty(self) -> bool:
        """Matches everything (no requirements)."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        ls = labels or {}
        for key, op, values in self.requirements:
            if op == "in":
                if ls.get(key) not in values:
                    return False
            elif op == "notin":
                if key in ls and ls[key] in values:
                    return False
            elif op == "exists":
                if key not in ls:
                    return False
            elif key in ls:  # "!"
                return False
        return True

    def __repr__(self) -> str:
        return "Selector(<nothing>)" if self.nothing else f"Selector({self.requirements!r})"


NOTHING = Selector([], nothing=True)
EVERYTHING = Selector([])
_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def selector_from_set(labels: Mapping[str, Any] | None) -> Selector:
    """Equality requirements for every label of `labels` (labels.SelectorFromSet)."""
    return Selector([(str(k), "in", frozenset([str(v)])) for k, v in (labels or {}).items()])


def selector_from_label_selector(sel: Any) -> Selector:
    """Compile a metav1.LabelSelector; None matches nothing, {} matches everything."""
    if sel is None:
        return NOTHING
    if not isinstance(sel, dict):
        raise InvalidSelector(f"a label selector must be an object, not {type(sel).__name__}")
    reqs: list[Requirement] = [(str(k), "in", frozenset([str(v)]))
                               for k, v in (sel.get("matchLabels") or {}).items()]
    for expr in sel.get("matchExpressions") or ():
        if not isinstance(expr, dict):
            raise InvalidSelector("a matchExpressions entry must be an object")
        key, op_name, values = str(expr.get("key", "")), expr.get("operator"), expr.get("values") or []
        op = _OPERATORS.get(str(op_name))
        if op is None:
            raise InvalidSelector(f"{op_name!r} is not a valid label selector operator")
        if op in ("in", "notin") and not values:
            raise InvalidSelector(f"for 'in', 'notin' operators, values set can't be empty (key {key!r})")
        if op in ("exists", "!") and values:
            raise InvalidSelector(f"values set must be empty for exists and does not exist (key {key!r})")
        reqs.append((key, op, frozenset(str(v) for v in values)))
    return Selector(reqs)


# -- cached owners --------------------------------------------------------------------------------
def spec_selector(obj: Obj) -> Selector:
    """The compiled spec.selector (a LabelSelector) of a workload object (raises InvalidSelector)."""
    return selector_from_label_selector((obj.get("spec") or {}).get("selector"))


def resolve_controller_ref(indexer: Indexer, namespace: str, ref: Obj, *, kind: str) -> Obj | None:
    """The cached object a controller reference names, if it is of `kind` and has the reference's
    UID (a new object of the same name is not it)."""
    if ref.get("kind") != kind:
        return None
    obj = indexer.get_by_key(f"{namespace}/{ref.get('name')}")
    if obj is None or meta(obj).get("uid") != ref.get("uid"):
        return None
    return obj


def selecting_objects(indexer: Indexer, obj: Obj, *,
                      selector_of: Callable[[Obj], Selector] = spec_selector) -> list[Obj]:
    """Cached objects of `obj`'s namespace whose valid, non-empty selector matches its labels (who
    may adopt an orphan); none for an object without labels."""
    labels = labels_of(obj)
    if not labels:
        return []
    out = []
    for candidate in indexer.by_index(NAMESPACE_INDEX, str(meta(obj).get("namespace") or "")):
        try:
            selector = selector_of(candidate)
        except InvalidSelector:
            continue
        if not selector.empty and selector.matches(labels):
            out.append(candidate)
    return out


# -- slow start -----------------------------------------------------------------------------------
async def slow_start_batch(count: int, initial_batch_size: int,
                           fn: Callable[[], Awaitable[None]]) -> tuple[int, BaseException | None]:
    """Call `fn` `count` times: batches of initial_batch_size, then doubling, each batch's calls
    concurrent. After a batch in which any call failed, no further batch starts. Returns the
    number of successful calls and the first error (None when all succeeded)."""
    remaining, successes = count, 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        results = await asyncio.gather(*(fn() for _ in range(batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for e in errors:
            if isinstance(e, asyncio.CancelledError):
                raise e
        successes += batch - len(errors)
        if errors:
            return successes, errors[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


# -- int-or-percent -------------------------------------------------------------------------------
def scaled_value_from_int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    """An IntOrString (3 or "25%") scaled against `total`; percentages round up or down
    (intstr.GetScaledValueFromIntOrPercent). Raises ValueError for None or a malformed value."""
    if value is None:
        raise ValueError("nil value for IntOrString")
    if isinstance(value, bool):
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    try:
        percent = int(text[:-1])
    except ValueError:
        raise ValueError(f"invalid value for IntOrString: invalid value {text!r}") from None
    scaled = percent * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)
