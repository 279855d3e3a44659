"""How a Job's policies judge its pods (upstream pkg/controller/job/pod_failure_policy.go and
success_policy.go).

podFailurePolicy. The rules are tried in order against a failed pod; the first that matches
decides:

    action      job failure message   counts toward backoffLimit
    FailJob     yes (the Job fails)   yes
    FailIndex   no                    yes (and fails the pod's index, backoffLimitPerIndex)
    Count       no                    yes
    Ignore      no                    no
    (no match)  no                    yes

An onExitCodes rule matches a container (regular containers first, then init containers; only
those named by containerName, when given) that terminated with a non-zero exit code that is In /
NotIn the values. An onPodConditions rule matches a pod condition with that type and status.
The FailJob messages are upstream's:

    "Container main for pod ns/p-1 failed with exit code 42 matching FailJob rule at index 0"
    "Pod ns/p-1 has condition DisruptionTarget matching FailJob rule at index 1"

successPolicy (Indexed Jobs). A rule with succeededIndexes is met when every index of that set
has succeeded, or at least succeededCount of them; a rule with only succeededCount is met when
that many indexes succeeded. The first met rule makes the Job SuccessCriteriaMet with the message
"Matched rules at index <i>".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubecore.controllers.controller_utils import meta
from kubecore.controllers.job_indexes import Intervals, parse_indexes, total
from kubecore.controllers.job_pods import container_statuses

Obj = dict[str, Any]

FAIL_JOB, FAIL_INDEX, COUNT, IGNORE = "FailJob", "FailIndex", "Count", "Ignore"


@dataclass(frozen=True)
class PolicyMatch:
    """What matching a failed pod against the podFailurePolicy says (matchPodFailurePolicy)."""

    job_failure_message: str | None = None
    count_failed: bool = True
    action: str | None = None


NO_MATCH = PolicyMatch()


def _exit_code_matches(code: int, requirement: Obj) -> bool:
    values = requirement.get("values") or []
    op = requirement.get("operator")
    if op == "In":
        return code in values
    if op == "NotIn":
        return code not in values
    return False


def _matching_container(statuses: list[Obj], requirement: Obj) -> tuple[str, int] | None:
    wanted = requirement.get("containerName")
    for c in statuses:
        state = c.get("state") if isinstance(c.get("state"), dict) else {}
        terminated = state.get("terminated") if isinstance(state, dict) else None
        if not isinstance(terminated, dict):
            continue
        if wanted is not None and wanted != c.get("name"):
            continue
        code = int(terminated.get("exitCode") or 0)
        if code != 0 and _exit_code_matches(code, requirement):
            return str(c.get("name", "")), code
    return None


def match_on_exit_codes(pod: Obj, requirement: Obj) -> tuple[str, int] | None:
    """(container name, exit code) of the first terminated container matching, if any."""
    return (_matching_container(container_statuses(pod), requirement)
            or _matching_container(container_statuses(pod, init=True), requirement))


def match_on_pod_conditions(pod: Obj, patterns: list[Obj]) -> str | None:
    """The type of the first pod condition matching one of `patterns`, if any."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if not isinstance(cond, dict):
            continue
        for pattern in patterns:
            if cond.get("type") == pattern.get("type") and cond.get("status") == pattern.get("status"):
                return str(cond.get("type"))
    return None


def _outcome(action: str, failjob_message: str) -> PolicyMatch | None:
    if action == IGNORE:
        return PolicyMatch(None, False, IGNORE)
    if action in (FAIL_INDEX, COUNT):
        return PolicyMatch(None, True, action)
    if action == FAIL_JOB:
        return PolicyMatch(failjob_message, True, FAIL_JOB)
    return None


def match_pod_failure_policy(policy: Obj | None, pod: Obj) -> PolicyMatch:
    """Judge a failed pod by `policy` (the job's spec.podFailurePolicy; None matches nothing)."""
    if not policy:
        return NO_MATCH
    m = meta(pod)
    for index, rule in enumerate(policy.get("rules") or ()):
        if not isinstance(rule, dict):
            continue
        action = str(rule.get("action") or "")
        if rule.get("onExitCodes") is not None:
            hit = match_on_exit_codes(pod, rule["onExitCodes"])
            if hit is not None:
                msg = (f"Container {hit[0]} for pod {m.get('namespace')}/{m.get('name')} failed with exit code "
                       f"{hit[1]} matching {action} rule at index {index}")
                out = _outcome(action, msg)
                if out is not None:
                    return out
        elif rule.get("onPodConditions") is not None:
            cond = match_on_pod_conditions(pod, list(rule["onPodConditions"]))
            if cond is not None:
                msg = (f"Pod {m.get('namespace')}/{m.get('name')} has condition {cond} matching {action} "
                       f"rule at index {index}")
                out = _outcome(action, msg)
                if out is not None:
                    return out
    return NO_MATCH


# -- success policy --------------------------------------------------------------------------------
def _succeeded_indexes_rule_met(rule_ix: Intervals, succeeded: Intervals, count: int | None) -> bool:
    contains, i, j = 0, 0, 0
    while i < len(rule_ix) and j < len(succeeded):
        overlap = min(rule_ix[i][1], succeeded[j][1]) - max(rule_ix[i][0], succeeded[j][0]) + 1
        if overlap > 0:
            contains += overlap
        if succeeded[j][1] < rule_ix[i][1]:
            j += 1
        elif succeeded[j][1] > rule_ix[i][1]:
            i += 1
        else:
            i, j = i + 1, j + 1
    return contains == total(rule_ix) or (count is not None and contains >= count)


def match_success_policy(policy: Obj | None, completions: int, succeeded: Intervals) -> str | None:
    """The SuccessCriteriaMet message when a rule of `policy` is met, else None."""
    if not policy or not succeeded:
        return None
    for index, rule in enumerate(policy.get("rules") or ()):
        if not isinstance(rule, dict):
            continue
        count = rule.get("succeededCount")
        if rule.get("succeededIndexes") is not None:
            required = parse_indexes(str(rule["succeededIndexes"]), completions)
            if required and _succeeded_indexes_rule_met(required, succeeded, None if count is None else int(count)):
                return f"Matched rules at index {index}"
        elif count is not None and total(succeeded) >= int(count):
            return f"Matched rules at index {index}"
    return None
