"""Per-kind validation of built-in objects: what each upstream strategy's Validate and
ValidateUpdate check beyond metadata (meta.py has that), with upstream's field paths and texts.

    errs = kinds.validate_create(rt, obj)        # after meta.prepare_create
    errs = kinds.validate_update(rt, new, old)   # after meta.prepare_update (main resource only)
    if errs: raise errors.invalid(rt, name, errs)

Both return FieldErrors (empty: valid). A value upstream's decoder would refuse before
validation (a malformed quantity, non-base64 secret data) raises StatusError 400 with the
decoder's message instead. Both first apply the kind's strategy where validation depends on it
(a Job's generated selector on create; a Service's type-dependent fields on update). One module per group or kind:
pods/podspec/containers, service, config, cluster, storage, apps, batch/cron, policy, networking.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from kubecore.api import errors, eventconv
from kubecore.api.errors import FieldError
from kubecore.api.kinds import apps, batch, cluster, config, networking, pods, policy, service, storage
from kubecore.api.kinds.common import DecodeError
from kubecore.api.registry import ResourceType

__all__ = ["validate_create", "validate_update", "CREATE", "UPDATE"]

Obj = dict[str, Any]
Create = Callable[[Obj], list[FieldError]]
Update = Callable[[Obj, Obj], list[FieldError]]

_RBAC, _NET = "rbac.authorization.k8s.io", "networking.k8s.io"


def _same(fn: Create) -> Update:
    """An update validated like a create (upstream's ValidateXUpdate = metadata + ValidateX)."""
    return lambda new, old: fn(new)


def _core_event(obj: Obj) -> Obj:
    """A shallow copy of an events.k8s.io/v1 Event in core/v1 form (the request's object stays as is)."""
    return eventconv.to_core(dict(obj))


# (group, kind) -> (create, update)
_TABLE: dict[tuple[str, str], tuple[Create, Update]] = {
    ("", "Pod"): (pods.pod_create, pods.pod_update),
    ("", "PodTemplate"): (pods.pod_template_create, pods.pod_template_update),
    ("", "ReplicationController"): (pods.replication_controller, pods.replication_controller_update),
    ("", "Service"): (service.service, service.service_update),
    ("", "ConfigMap"): (config.config_map, config.config_map_update),
    ("", "Secret"): (config.secret, config.secret_update),
    ("", "Namespace"): (config.namespace, _same(config.namespace)),
    ("", "Event"): (config.event, _same(config.event)),
    # events.k8s.io/v1 objects are validated in core/v1 form, as upstream validates the internal type
    ("events.k8s.io", "Event"): (lambda obj: config.events_event(_core_event(obj)),
                                 lambda new, old: config.events_event_update(_core_event(new), _core_event(old))),
    ("", "Node"): (cluster.node, cluster.node_update),
    ("", "Endpoints"): (cluster.endpoints, _same(cluster.endpoints)),
    ("", "LimitRange"): (cluster.limit_range, _same(cluster.limit_range)),
    ("", "ResourceQuota"): (cluster.resource_quota, cluster.resource_quota_update),
    ("", "PersistentVolume"): (storage.persistent_volume, storage.persistent_volume_update),
    ("", "PersistentVolumeClaim"): (storage.persistent_volume_claim, storage.persistent_volume_claim_update),
    ("storage.k8s.io", "StorageClass"): (storage.storage_class, storage.storage_class_update),
    ("apps", "Deployment"): (apps.deployment, apps.deployment_update),
    ("apps", "ReplicaSet"): (apps.replica_set, apps.replica_set_update),
    ("apps", "StatefulSet"): (apps.stateful_set, apps.stateful_set_update),
    ("apps", "DaemonSet"): (apps.daemon_set, apps.daemon_set_update),
    ("apps", "ControllerRevision"): (apps.controller_revision, apps.controller_revision_update),
    ("batch", "Job"): (batch.job, batch.job_update),
    ("batch", "CronJob"): (batch.cron_job, batch.cron_job_update),
    ("policy", "PodDisruptionBudget"): (policy.pod_disruption_budget, policy.pod_disruption_budget_update),
    ("scheduling.k8s.io", "PriorityClass"): (policy.priority_class, policy.priority_class_update),
    ("coordination.k8s.io", "Lease"): (policy.lease, policy.lease_update),
    (_RBAC, "Role"): (policy.role, _same(policy.role)),
    (_RBAC, "ClusterRole"): (policy.cluster_role, _same(policy.cluster_role)),
    (_RBAC, "RoleBinding"): (policy.role_binding, policy.role_binding_update),
    (_RBAC, "ClusterRoleBinding"): (policy.cluster_role_binding, policy.cluster_role_binding_update),
    ("autoscaling", "HorizontalPodAutoscaler"): (policy.horizontal_pod_autoscaler,
                                                 policy.horizontal_pod_autoscaler_update),
    (_NET, "Ingress"): (networking.ingress, networking.ingress_update),
    (_NET, "IngressClass"): (networking.ingress_class, networking.ingress_class_update),
    (_NET, "NetworkPolicy"): (networking.network_policy, networking.network_policy_update),
    ("discovery.k8s.io", "EndpointSlice"): (networking.endpoint_slice, networking.endpoint_slice_update),
}
CREATE: dict[tuple[str, str], Create] = {k: v[0] for k, v in _TABLE.items()}
UPDATE: dict[tuple[str, str], Update] = {k: v[1] for k, v in _TABLE.items()}


def _decode_error(rt: ResourceType, e: DecodeError) -> errors.StatusError:
    return errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {e}')


def validate_create(rt: ResourceType, obj: Obj) -> list[FieldError]:
    """The kind's create validation (after its create strategy); [] for kinds without rules."""
    key = (rt.group, rt.kind)
    fn = CREATE.get(key)
    if fn is None:
        return []
    if key == ("batch", "Job"):
        batch.generate_selector(obj)
    memo_key = _pod_memo_key(key, obj)
    if memo_key is not None and memo_key in _POD_CREATE_MEMO:
        return list(_POD_CREATE_MEMO[memo_key])
    try:
        errs = fn(obj)
    except DecodeError as e:
        raise _decode_error(rt, e) from None
    if memo_key is not None:
        if len(_POD_CREATE_MEMO) >= POD_MEMO_SIZE:
            _POD_CREATE_MEMO.clear()
        _POD_CREATE_MEMO[memo_key] = tuple(errs)
    return errs


# Pod create validation reads only the spec (metadata is meta.py's): pods of one template (a
# controller's, a benchmark's) are validated once. FieldErrors are never changed once made: shared safely.
POD_MEMO_SIZE = 1024
_POD_CREATE_MEMO: dict[bytes, tuple[FieldError, ...]] = {}


def _pod_memo_key(key: tuple[str, str], obj: Obj) -> bytes | None:
    if key != ("", "Pod"):
        return None
    return msgspec.json.encode(obj.get("spec"))


def validate_update(rt: ResourceType, new: Obj, old: Obj) -> list[FieldError]:
    """The kind's update validation (immutability included; after the kind's update strategy
    where validation depends on it: a service's type-dependent fields); [] for kinds without rules."""
    key = (rt.group, rt.kind)
    fn = UPDATE.get(key)
    if fn is None:
        return []
    if key == ("", "Service"):
        service.drop_type_dependent_fields(new, old)
    try:
        return fn(new, old)
    except DecodeError as e:
        raise _decode_error(rt, e) from None
