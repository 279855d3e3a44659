"""podFailurePolicy matching (FailJob / FailIndex / Count / Ignore on exit codes and pod
conditions, upstream's messages), successPolicy rules, and the failure backoff arithmetic."""

from __future__ import annotations

from kubecore.controllers.job_failures import BackoffStore, remaining_for_failures
from kubecore.controllers.job_policy import match_pod_failure_policy, match_success_policy
from tests.unit.controllers.test_job_fixtures import NOW, make_pod


def policy(*rules: dict[str, object]) -> dict[str, object]:
    return {"rules": list(rules)}


def test_fail_job_on_exit_code_message() -> None:
    pod = make_pod("p-1", phase="Failed", exit_code=42)
    m = match_pod_failure_policy(policy({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 42]}}),
                                 pod)
    assert m.action == "FailJob" and m.count_failed
    assert m.job_failure_message == "Container main for pod default/p-1 failed with exit code 42 matching FailJob rule at index 0"


def test_first_matching_rule_wins_and_not_in_operator() -> None:
    pod = make_pod("p-1", phase="Failed", exit_code=3)
    p = policy({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [9]}},
               {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0, 1]}},
               {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}})
    m = match_pod_failure_policy(p, pod)
    assert (m.action, m.count_failed, m.job_failure_message) == ("Count", True, None)


def test_container_name_filter_and_zero_exit_codes_never_match() -> None:
    pod = make_pod("p-1", phase="Failed", exit_code=5)
    assert match_pod_failure_policy(policy({"action": "FailJob", "onExitCodes": {
        "containerName": "sidecar", "operator": "In", "values": [5]}}), pod).action is None
    ok = make_pod("p-2", phase="Failed", exit_code=0)
    assert match_pod_failure_policy(policy({"action": "FailJob", "onExitCodes": {
        "operator": "NotIn", "values": [1]}}), ok).action is None


def test_pod_condition_rules() -> None:
    pod = make_pod("p-1", phase="Failed", conditions=[{"type": "DisruptionTarget", "status": "True"}])
    ignore = match_pod_failure_policy(policy({"action": "Ignore", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}), pod)
    assert (ignore.action, ignore.count_failed) == ("Ignore", False)
    fail = match_pod_failure_policy(policy({"action": "FailJob", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}), pod)
    assert fail.job_failure_message == "Pod default/p-1 has condition DisruptionTarget matching FailJob rule at index 0"
    index = match_pod_failure_policy(policy({"action": "FailIndex", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}), pod)
    assert (index.action, index.count_failed) == ("FailIndex", True)


def test_no_policy_counts_everything() -> None:
    m = match_pod_failure_policy(None, make_pod("p", phase="Failed", exit_code=1))
    assert (m.action, m.count_failed, m.job_failure_message) == (None, True, None)


def test_success_policy_rules() -> None:
    succeeded = [(0, 2), (5, 5)]
    assert match_success_policy({"rules": [{"succeededIndexes": "0-2"}]}, 10, succeeded) == "Matched rules at index 0"
    assert match_success_policy({"rules": [{"succeededIndexes": "0-3"}]}, 10, succeeded) is None
    assert match_success_policy({"rules": [{"succeededIndexes": "0-9", "succeededCount": 3}]}, 10, succeeded) \
        == "Matched rules at index 0"
    assert match_success_policy({"rules": [{"succeededCount": 5}, {"succeededCount": 4}]}, 10, succeeded) \
        == "Matched rules at index 1"
    assert match_success_policy(None, 10, succeeded) is None


def test_backoff_doubles_from_ten_seconds_and_is_capped() -> None:
    assert remaining_for_failures(100, 0, None) == 0
    assert remaining_for_failures(100, 1, 100) == 10
    assert remaining_for_failures(140, 2, 130) == 10  # the backoff module's worked example
    assert remaining_for_failures(100, 3, 100) == 40
    assert remaining_for_failures(100, 20, 100) == 600  # capped at MaxJobPodFailureBackOff
    assert remaining_for_failures(1000, 2, 100) == 0


def test_backoff_record_resets_on_success() -> None:
    store = BackoffStore()
    failed = [make_pod("f1", phase="Failed", exit_code=1, finished_at=NOW - 50),
              make_pod("f2", phase="Failed", exit_code=1, finished_at=NOW - 40)]
    record = store.new_record("k", [], failed)
    assert (record.failures_after_last_success, record.last_failure_time) == (2, NOW - 40)
    store.update(record)
    success = [make_pod("s", phase="Succeeded", exit_code=0, finished_at=NOW - 30)]
    late = [make_pod("f3", phase="Failed", exit_code=1, finished_at=NOW - 20)]
    record = store.new_record("k", success, late)
    assert (record.failures_after_last_success, record.last_failure_time) == (1, NOW - 20)
    assert store.new_record("k", success, []).failures_after_last_success == 0
