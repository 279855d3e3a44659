"""The pod status the kubelet reports, as pure functions (upstream kubelet_pods.go
generateAPIPodStatus / convertToAPIContainerStatuses / getPhase, status/generate.go, and the
prober manager's UpdatePodStatus).

    status = generate_pod_status(pod, runtime_status, old=old_status, pod_is_terminal=False,
                                 reasons=reason_cache, probes=probe_view, host_ips=["10.0.0.5"],
                                 runtime_name="sim")

Container statuses (per container of the spec, sorted by name; init containers in spec order):
- default: waiting "ContainerCreating" ("PodInitializing" when the pod has init containers),
  restartCount and lastState carried over from the old status; a terminated old status is kept;
- the runtime's newest instance gives `state` (running: startedAt; exited: terminated with
  exitCode/reason/message/startedAt/finishedAt/containerID; created: waiting with no reason),
  the one before it gives `lastState`;
- a container that should be restarted and has a cached start failure is waiting with that
  reason ("CrashLoopBackOff", "ErrImagePull", ...); what it was becomes `lastState`;
- a container that vanished from the runtime while the old status said running becomes
  terminated "ContainerStatusUnknown", exit code 137;
- `started`: running and its startup probe (if any) succeeded; `ready`: started and its
  readiness probe (if any) succeeded; a regular init container is ready once it exited 0.

Phase (getPhase): Pending while init containers run or any container waits; Running when all
started and one runs; with all stopped: Succeeded/Failed when the pod is terminal or the restart
policy will not restart them (Always -> Running, OnFailure with a failure -> Running).
A pod the API already shows as Succeeded/Failed keeps that phase.

Conditions (the kubelet-owned ones, in upstream's order): PodReadyToStartContainers,
Initialized, Ready, ContainersReady, PodScheduled; reasons and messages as upstream
("ContainersNotReady", "containers with unready status: [web]", "PodCompleted", ...).
`lastTransitionTime` is the old condition's when its status did not change, else now.
"""

from __future__ import annotations

from typing import Any, Protocol

from kubecore.kubelet import podutil
from kubecore.kubelet.actions import SUCCESS, pod_sandbox_changed, should_container_be_restarted
from kubecore.kubelet.backoff import ReasonCache
from kubecore.kubelet.cri import ContainerState
from kubecore.kubelet.runtime_status import ContainerView, PodRuntimeStatus

Obj = dict[str, Any]

CONTAINER_CREATING = "ContainerCreating"
POD_INITIALIZING = "PodInitializing"
STATUS_UNKNOWN = "ContainerStatusUnknown"
UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
KUBELET_CONDITION_SET = frozenset(KUBELET_CONDITIONS)


class ProbeView(Protocol):
    """Readiness/startup results by runtime container id, and which containers have a probe."""

    def readiness(self, container_id: str) -> str | None: ...

    def startup(self, container_id: str) -> str | None: ...


def container_id_string(runtime_name: str, cid: str) -> str:
    return f"{runtime_name}://{cid}"


def raw_container_id(container_id: str) -> str:
    return container_id.split("://", 1)[-1]


def go_list(names: list[str]) -> str:
    """Go's %s of a []string: "[a b]"."""
    return "[" + " ".join(names) + "]"


# -- container statuses ------------------------------------------------------------------------------


def _convert(cs: ContainerView, old: Obj | None, runtime_name: str) -> Obj:
    cid = container_id_string(runtime_name, cs.id)
    restart_count = cs.restart_count
    if cs.state == ContainerState.CONTAINER_RUNNING:
        state: Obj = {"running": {"startedAt": podutil.rfc3339(cs.started_at)}}
    elif cs.state == ContainerState.CONTAINER_EXITED:
        term: Obj = {"exitCode": cs.exit_code}
        if cs.reason:
            term["reason"] = cs.reason
        if cs.message:
            term["message"] = cs.message
        term["startedAt"] = podutil.rfc3339(cs.started_at) if cs.started_at else None
        term["finishedAt"] = podutil.rfc3339(cs.finished_at) if cs.finished_at else None
        term["containerID"] = cid
        state = {"terminated": term}
    elif cs.state == ContainerState.CONTAINER_UNKNOWN and old is not None and "running" in (old.get("state") or {}):
        state = {"terminated": {"exitCode": 137, "reason": STATUS_UNKNOWN,
                                "message": "The container could not be located when the pod was terminated",
                                "startedAt": None, "finishedAt": None}}
        restart_count = int(old.get("restartCount") or 0) + 1
    else:
        state = {"waiting": {}}
    return {"name": cs.name, "state": state, "lastState": {}, "ready": False, "restartCount": restart_count,
            "image": cs.image, "imageID": cs.image_ref, "containerID": cid}


def _default_statuses(specs: list[Obj], old: dict[str, Obj], *, has_init: bool) -> dict[str, Obj]:
    reason = POD_INITIALIZING if has_init else CONTAINER_CREATING
    out: dict[str, Obj] = {}
    for c in specs:
        name = str(c.get("name"))
        prev = old.get(name)
        if prev is not None and "terminated" in (prev.get("state") or {}):
            out[name] = dict(prev)
            continue
        status: Obj = {"name": name, "state": {"waiting": {"reason": reason}}, "lastState": {}, "ready": False,
                       "restartCount": 0, "image": c.get("image", ""), "imageID": ""}
        if prev is not None:
            status["restartCount"] = int(prev.get("restartCount") or 0)
            status["lastState"] = prev.get("lastState") or {}
        out[name] = status
    return out


def _vanished_while_running(pod: Obj, rs: PodRuntimeStatus | None, statuses: dict[str, Obj], old: dict[str, Obj],
                            *, has_init: bool) -> None:
    """A container the old status showed running but the runtime no longer has."""
    default_reason = POD_INITIALIZING if has_init else CONTAINER_CREATING
    for name, status in statuses.items():
        if rs is not None and any(c.name == name and c.state == ContainerState.CONTAINER_CREATED
                                  for c in rs.containers):
            continue
        prev = old.get(name)
        if prev is None or "running" not in (prev.get("state") or {}):
            continue
        waiting = (status.get("state") or {}).get("waiting")
        if waiting is None or waiting.get("reason") != default_reason:
            continue
        if "terminated" in (status.get("lastState") or {}):
            continue
        status["lastState"] = {"terminated": {
            "exitCode": 137, "reason": STATUS_UNKNOWN, "startedAt": None, "finishedAt": None,
            "message": "The container could not be located when the pod was deleted.  The container used to be Running"}}
        if not podutil.deletion_timestamp(pod):
            status["restartCount"] = int(status.get("restartCount") or 0) + 1


def convert_container_statuses(pod: Obj, rs: PodRuntimeStatus | None, old_list: list[Obj] | None,
                               specs: list[Obj], *, is_init: bool, has_init: bool, reasons: ReasonCache | None,
                               runtime_name: str) -> list[Obj]:
    """convertToAPIContainerStatuses (see the module docstring)."""
    old = {str(s.get("name")): s for s in old_list or []}
    statuses = _default_statuses(specs, old, has_init=has_init)
    _vanished_while_running(pod, rs, statuses, old, has_init=has_init)
    seen: dict[str, int] = {}
    for cs in rs.containers if rs is not None else ():
        if cs.name not in statuses or seen.get(cs.name, 0) >= 2:
            continue
        converted = _convert(cs, old.get(cs.name), runtime_name)
        if seen.get(cs.name, 0) == 0:
            statuses[cs.name] = converted
        else:
            statuses[cs.name]["lastState"] = converted["state"]
        seen[cs.name] = seen.get(cs.name, 0) + 1
    uid = podutil.uid_of(pod)
    for c in specs:
        name = str(c.get("name"))
        if rs is None:
            break
        if is_init:
            latest = rs.find(name)
            if latest is not None and latest.exited and latest.exit_code == 0:
                continue
        if not should_container_be_restarted(c, pod, rs):
            continue
        cached = reasons.get(uid, name) if reasons is not None else None
        if cached is None:
            continue
        status = statuses[name]
        if "terminated" in (status.get("state") or {}):
            status["lastState"] = status["state"]
        waiting: Obj = {"reason": cached.reason}
        if cached.message:
            waiting["message"] = cached.message
        status["state"] = {"waiting": waiting}
    if is_init:
        return [statuses[str(c.get("name"))] for c in specs]
    return [statuses[name] for name in sorted(statuses)]


def apply_probe_state(pod: Obj, init_statuses: list[Obj], statuses: list[Obj], probes: ProbeView | None) -> None:
    """The prober manager's UpdatePodStatus: `started` and `ready` of every container status."""
    specs = {str(c.get("name")): c for c in podutil.containers(pod)}
    init_specs = {str(c.get("name")): c for c in podutil.init_containers(pod)}
    for status in statuses:
        _probe_state(status, specs.get(str(status.get("name"))) or {}, probes)
    for status in init_statuses:
        spec = init_specs.get(str(status.get("name"))) or {}
        if podutil.is_restartable_init_container(spec):
            _probe_state(status, spec, probes)
            continue
        status["started"] = _started(status, spec, probes)
        term = (status.get("state") or {}).get("terminated")
        status["ready"] = bool(term is not None and term.get("exitCode") == 0)


def _started(status: Obj, spec: Obj, probes: ProbeView | None) -> bool:
    if "running" not in (status.get("state") or {}):
        return False
    cid = raw_container_id(str(status.get("containerID") or ""))
    result = probes.startup(cid) if probes is not None else None
    if result is not None:
        return result == SUCCESS
    return not spec.get("startupProbe")


def _probe_state(status: Obj, spec: Obj, probes: ProbeView | None) -> None:
    started = _started(status, spec, probes)
    status["started"] = started
    if not started:
        status["ready"] = False
        return
    cid = raw_container_id(str(status.get("containerID") or ""))
    result = probes.readiness(cid) if probes is not None else None
    status["ready"] = result == SUCCESS if result is not None else not spec.get("readinessProbe")


# -- phase -------------------------------------------------------------------------------------------


def _state(status: Obj | None) -> Obj:
    return (status or {}).get("state") or {}


def has_any_regular_container_started(pod: Obj, statuses: list[Obj]) -> bool:
    by_name = {str(s.get("name")): s for s in statuses}
    for c in podutil.containers(pod):
        s = by_name.get(str(c.get("name")))
        if s is not None and ("running" in _state(s) or "terminated" in _state(s)):
            return True
    return False


def get_phase(pod: Obj, init_statuses: list[Obj], statuses: list[Obj], *, pod_is_terminal: bool) -> str:
    """getPhase, as upstream (including restartable init containers)."""
    inits = {str(s.get("name")): s for s in init_statuses}
    regular = {str(s.get("name")): s for s in statuses}
    pending_init = failed_init = 0
    unknown = running = waiting = stopped = succeeded = 0
    for c in podutil.init_containers(pod):
        s = inits.get(str(c.get("name")))
        st = _state(s)
        last = (s or {}).get("lastState") or {}
        if podutil.is_restartable_init_container(c):
            if s is None:
                unknown += 1
            elif "running" in st:
                running += 1
                if not s.get("started"):
                    pending_init += 1
            elif "terminated" in st:
                pass
            elif "waiting" in st:
                if "terminated" not in last:
                    pending_init += 1
                    waiting += 1
            else:
                pending_init += 1
                unknown += 1
            continue
        if s is None or "running" in st:
            pending_init += 1
        elif "terminated" in st:
            if st["terminated"].get("exitCode", 0) != 0:
                failed_init += 1
        elif "waiting" in st and "terminated" in last:
            if last["terminated"].get("exitCode", 0) != 0:
                failed_init += 1
        else:
            pending_init += 1
    for c in podutil.containers(pod):
        s = regular.get(str(c.get("name")))
        st = _state(s)
        if s is None:
            unknown += 1
        elif "running" in st:
            running += 1
        elif "terminated" in st:
            stopped += 1
            if st["terminated"].get("exitCode", 0) == 0:
                succeeded += 1
        elif "waiting" in st:
            if "terminated" in ((s.get("lastState") or {})):
                stopped += 1
            else:
                waiting += 1
        else:
            unknown += 1
    policy = podutil.restart_policy(pod)
    if failed_init > 0 and policy == podutil.RESTART_NEVER:
        return podutil.FAILED
    if (pending_init > 0 and not has_any_regular_container_started(pod, statuses)) or waiting > 0:
        return podutil.PENDING
    if running > 0 and unknown == 0:
        return podutil.RUNNING
    if running == 0 and stopped > 0 and unknown == 0:
        if pod_is_terminal:
            return podutil.SUCCEEDED if stopped == succeeded else podutil.FAILED
        if policy == podutil.RESTART_ALWAYS:
            return podutil.RUNNING
        if stopped == succeeded:
            return podutil.SUCCEEDED
        if policy == podutil.RESTART_NEVER:
            return podutil.FAILED
        return podutil.RUNNING
    return podutil.PENDING


# -- conditions --------------------------------------------------------------------------------------


def _cond(ctype: str, status: str, pod: Obj, reason: str = "", message: str = "") -> Obj:
    c: Obj = {"type": ctype, "status": status}
    gen = podutil.meta(pod).get("generation")
    if isinstance(gen, int):
        c["observedGeneration"] = gen
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def containers_ready_condition(pod: Obj, init_statuses: list[Obj], statuses: list[Obj], phase: str) -> Obj:
    by_name = {str(s.get("name")): s for s in [*init_statuses, *statuses]}
    unknown: list[str] = []
    unready: list[str] = []
    relevant = [c for c in podutil.init_containers(pod) if podutil.is_restartable_init_container(c)]
    for c in [*relevant, *podutil.containers(pod)]:
        name = str(c.get("name"))
        s = by_name.get(name)
        if s is None:
            unknown.append(name)
        elif not s.get("ready"):
            unready.append(name)
    if (phase == podutil.SUCCEEDED and not unknown) or phase == podutil.FAILED:
        return _cond("ContainersReady", "False", pod, POD_COMPLETED if phase == podutil.SUCCEEDED else POD_FAILED)
    return _all_or_list("ContainersReady", pod, CONTAINERS_NOT_READY, unknown, unready, "unready")


def _all_or_list(ctype: str, pod: Obj, reason: str, unknown: list[str], pending: list[str], what: str) -> Obj:
    """True, or False with upstream's message naming the containers that are unknown / `what`."""
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {go_list(unknown)}")
    if pending:
        messages.append(f"containers with {what} status: {go_list(pending)}")
    if messages:
        return _cond(ctype, "False", pod, reason, ", ".join(messages))
    return _cond(ctype, "True", pod)


def ready_condition(pod: Obj, conditions: list[Obj], containers_ready: Obj) -> Obj:
    if containers_ready["status"] != "True":
        return _cond("Ready", containers_ready["status"], pod, containers_ready.get("reason", ""),
                     containers_ready.get("message", ""))
    messages = []
    by_type = {c.get("type"): c for c in conditions}
    for gate in podutil.spec(pod).get("readinessGates") or []:
        ctype = str(gate.get("conditionType"))
        c = by_type.get(ctype)
        if c is None:
            messages.append(f'corresponding condition of pod readiness gate "{ctype}" does not exist.')
        elif c.get("status") != "True":
            messages.append(f'the status of pod readiness gate "{ctype}" is not "True", but {c.get("status")}')
    if messages:
        return _cond("Ready", "False", pod, READINESS_GATES_NOT_READY, ", ".join(messages))
    return _cond("Ready", "True", pod)


def initialized_condition(pod: Obj, init_statuses: list[Obj], statuses: list[Obj], phase: str) -> Obj:
    by_name = {str(s.get("name")): s for s in init_statuses}
    unknown: list[str] = []
    incomplete: list[str] = []
    for c in podutil.init_containers(pod):
        name = str(c.get("name"))
        s = by_name.get(name)
        if s is None:
            unknown.append(name)
        elif podutil.is_restartable_init_container(c):
            if not s.get("started"):
                incomplete.append(name)
        elif not s.get("ready"):
            incomplete.append(name)
    if phase == podutil.SUCCEEDED and not unknown:
        return _cond("Initialized", "True", pod, POD_COMPLETED)
    if has_any_regular_container_started(pod, statuses):
        return _cond("Initialized", "True", pod)
    return _all_or_list("Initialized", pod, CONTAINERS_NOT_INITIALIZED, unknown, incomplete, "incomplete")


def ready_to_start_condition(pod: Obj, rs: PodRuntimeStatus | None) -> Obj:
    needed = True if rs is None else pod_sandbox_changed(pod, rs)[0]
    return _cond("PodReadyToStartContainers", "False" if needed else "True", pod)


def with_transition_times(conditions: list[Obj], old_conditions: list[Obj] | None, now: float) -> list[Obj]:
    """Each condition keeps the old lastTransitionTime when its status did not change, else gets now."""
    old = {c.get("type"): c for c in old_conditions or []}
    stamp = podutil.rfc3339(now)
    for c in conditions:
        prev = old.get(c["type"])
        if prev is not None and prev.get("status") == c["status"] and prev.get("lastTransitionTime"):
            c["lastTransitionTime"] = prev["lastTransitionTime"]
        else:
            c["lastTransitionTime"] = stamp
        c.setdefault("lastProbeTime", None)
    return conditions


# -- the whole status --------------------------------------------------------------------------------


def generate_pod_status(pod: Obj, rs: PodRuntimeStatus | None, *, old: Obj, pod_is_terminal: bool,
                        reasons: ReasonCache | None, probes: ProbeView | None, host_ips: list[str],
                        runtime_name: str, now: float) -> Obj:
    """generateAPIPodStatus: the kubelet-owned part of the pod's status (see the module docstring).
    `old` is the status the kubelet last produced for this pod, else the API's."""
    has_init = bool(podutil.init_containers(pod))
    init_statuses = convert_container_statuses(
        pod, rs, old.get("initContainerStatuses"), podutil.init_containers(pod), is_init=True, has_init=has_init,
        reasons=reasons, runtime_name=runtime_name)
    statuses = convert_container_statuses(
        pod, rs, old.get("containerStatuses"), podutil.containers(pod), is_init=False, has_init=has_init,
        reasons=reasons, runtime_name=runtime_name)
    apply_probe_state(pod, init_statuses, statuses, probes)
    phase = get_phase(pod, init_statuses, statuses, pod_is_terminal=pod_is_terminal)
    api_phase = podutil.phase_of(pod)
    if podutil.is_terminal(api_phase) and phase != api_phase:
        phase = api_phase  # pods never leave a terminal phase
    api_conditions = (pod.get("status") or {}).get("conditions") or []
    conditions = [ready_to_start_condition(pod, rs),
                  initialized_condition(pod, init_statuses, statuses, phase)]
    containers_ready = containers_ready_condition(pod, init_statuses, statuses, phase)
    conditions.append(ready_condition(pod, api_conditions, containers_ready))
    conditions.append(containers_ready)
    conditions.append(_cond("PodScheduled", "True", pod))
    old_conditions = old.get("conditions") or api_conditions
    status: Obj = {"observedGeneration": podutil.meta(pod).get("generation"), "phase": phase,
                   "conditions": with_transition_times(conditions, old_conditions, now)}
    if status["observedGeneration"] is None:
        del status["observedGeneration"]
    if host_ips:
        status["hostIP"] = host_ips[0]
        status["hostIPs"] = [{"ip": ip} for ip in host_ips]
    ips = rs.ips if rs is not None else []
    if podutil.is_host_network(pod) and host_ips:
        ips = [host_ips[0]]
    if not ips:
        ips = [str(p.get("ip")) for p in old.get("podIPs") or [] if p.get("ip")]
    if ips:
        status["podIP"] = ips[0]
        status["podIPs"] = [{"ip": ip} for ip in ips]
    start = old.get("startTime") or (pod.get("status") or {}).get("startTime")
    status["startTime"] = start or podutil.rfc3339(now)
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    status["containerStatuses"] = statuses
    status["qosClass"] = podutil.qos_class(pod)
    return status


def terminal_ready_conditions(status: Obj, pod: Obj) -> None:
    """mergePodStatus: a terminal phase is never written with Ready/ContainersReady True."""
    phase = status.get("phase")
    if not podutil.is_terminal(str(phase)):
        return
    reason = POD_COMPLETED if phase == podutil.SUCCEEDED else POD_FAILED
    for c in status.get("conditions") or []:
        if c.get("type") in ("Ready", "ContainersReady") and c.get("status") == "True":
            c["status"], c["reason"] = "False", reason
            c.pop("message", None)


def kubelet_owned(status: Obj) -> Obj:
    """The part of an API pod status the kubelet writes (for comparing with what it would write)."""
    out = {k: v for k, v in status.items() if k not in ("conditions", "nominatedNodeName", "resize", "reason",
                                                           "message", "ephemeralContainerStatuses",
                                                           "resourceClaimStatuses")}
    out["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") in KUBELET_CONDITION_SET]
    return out
