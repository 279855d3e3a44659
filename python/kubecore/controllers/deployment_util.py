"""What a Deployment's ReplicaSets say about it: revisions, copied annotations, the
pod-template-hash, which ReplicaSet is the new one, and the orders ReplicaSets are walked in
(upstream pkg/controller/deployment/util/deployment_util.go, controller.ComputeHash and the
ReplicaSet sort orders of pkg/controller/controller_utils.go).

Objects are the plain dicts of the API; functions named `set_*` mutate the dict they are given
(callers pass their own deep copy, never an informer's cached object) and say whether anything
changed, everything else is read-only.

Revisions. Every ReplicaSet of a Deployment carries `deployment.kubernetes.io/revision`; the new
ReplicaSet gets max(old revisions) + 1. When an old ReplicaSet becomes the new one again (a
rollback), its previous revisions are kept in `deployment.kubernetes.io/revision-history`
("1,3"), trimmed from the front to stay within 2,000 characters. Worked example: revisions 1
(template A) and 2 (template B); `kubectl rollout undo` puts A back, so the RS of revision 1 is
the new one and gets revision 3 and revision-history "1".

The pod-template-hash (`compute_hash`). Upstream hashes the Go struct dump (go-spew "%#v") of the
PodTemplateSpec with FNV-1a 32, writes collisionCount as 8 little-endian bytes after it, prints
the sum in decimal and maps every digit through `SafeEncodeString` (alphabet
"bcdfghjklmnpqrstvwxz2456789"), giving names such as `web-5d4f7b9c8`. kubecore does the same
except for the hashed bytes: it hashes the template's canonical JSON (keys sorted, no spaces,
empty values dropped as `normalized_template` does) instead of a Go struct dump, which depends on
the exact Go types of one Kubernetes release (upstream's own hashes change between releases). So
hashes have upstream's form and alphabet and are stable across restarts, but are not the same
strings a kube-controller-manager would pick for the same template. Nothing relies on the
value: templates are matched by `equal_ignore_hash`, never by hash.

Template equality (`equal_ignore_hash`) ignores the pod-template-hash label and, like
apimachinery's semantic DeepEqual on Go structs, treats a missing field, `null`, `{}` and `[]` as
the same (kubectl re-encodes templates through Go structs, e.g. adding
`metadata.creationTimestamp: null`, when it rolls back).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any

import msgspec

from kubecore.controllers.controller_utils import get_controller_of, meta, parse_time

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
DEPRECATED_ROLLBACK_TO = "deprecated.deployment.rollback.to"
LAST_APPLIED_CONFIG_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
CHANGE_CAUSE_ANNOTATION = "kubernetes.io/change-cause"
MAX_REV_HISTORY_LENGTH_IN_CHARS = 2000
"""revision-history is trimmed to this many characters (about 100 revisions)."""

ANNOTATIONS_TO_SKIP = frozenset({
    LAST_APPLIED_CONFIG_ANNOTATION, REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, DEPRECATED_ROLLBACK_TO,
})
"""Deployment annotations never copied to its ReplicaSets (and kept on rollback)."""

_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_FNV32_OFFSET, _FNV32_PRIME = 0x811C9DC5, 0x01000193
_encode_sorted = msgspec.json.Encoder(order="sorted")
_INT32_MAX = 2**31 - 1


# -- small accessors ------------------------------------------------------------------------------
def deep_copy(obj: Obj) -> Obj:
    """An independent copy of a JSON object (informer caches must never be mutated)."""
    out: Obj = msgspec.json.decode(msgspec.json.encode(obj))
    return out


def annotations_of(obj: Obj) -> dict[str, str]:
    a = meta(obj).get("annotations")
    return a if isinstance(a, dict) else {}


def _annotations_for_write(obj: Obj) -> dict[str, str]:
    m = obj.setdefault("metadata", {})
    a = m.get("annotations")
    if not isinstance(a, dict):
        a = m["annotations"] = {}
    out: dict[str, str] = a
    return out


def replicas_of(obj: Obj) -> int:
    """spec.replicas (1 when unset, the API default)."""
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def status_int(obj: Obj, field: str) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def template_of(obj: Obj) -> Obj:
    t = (obj.get("spec") or {}).get("template")
    return t if isinstance(t, dict) else {}


def creation_time(obj: Obj) -> float:
    t = parse_time(meta(obj).get("creationTimestamp"))
    return t if t is not None else 0.0


def is_controlled_by(obj: Obj, owner: Obj) -> bool:
    ref = get_controller_of(obj)
    return ref is not None and ref.get("uid") == meta(owner).get("uid")


# -- revisions ------------------------------------------------------------------------------------
def revision(obj: Obj) -> int | None:
    """The revision annotation as an int: 0 when absent, None when it is not an integer."""
    value = annotations_of(obj).get(REVISION_ANNOTATION)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        log.debug("couldn't parse revision %r of %s", value, meta(obj).get("name"))
        return None


def max_revision(rses: Iterable[Obj | None]) -> int:
    """The highest revision among `rses` (unparseable ones skipped)."""
    return max((v for rs in rses if rs is not None and (v := revision(rs)) is not None), default=0)


def last_revision(rses: Iterable[Obj | None]) -> int:
    """The second highest revision (the one before the current), 0 when there is none."""
    top = second = 0
    for rs in rses:
        v = revision(rs) if rs is not None else None
        if v is None:
            continue
        if v >= top:
            top, second = v, top
        elif v > second:
            second = v
    return second


def set_deployment_revision(d: Obj, value: str) -> bool:
    annotations = _annotations_for_write(d)
    if annotations.get(REVISION_ANNOTATION) == value:
        return False
    annotations[REVISION_ANNOTATION] = value
    return True


def copy_deployment_annotations_to_replica_set(d: Obj, rs: Obj) -> bool:
    """Copy every Deployment annotation except ANNOTATIONS_TO_SKIP; True if `rs` changed."""
    target = _annotations_for_write(rs)
    changed = False
    for key, value in annotations_of(d).items():
        if key in ANNOTATIONS_TO_SKIP or target.get(key) == value:
            continue
        target[key] = value
        changed = True
    return changed


def set_deployment_annotations_to(d: Obj, rollback_to: Obj) -> None:
    """On rollback: the Deployment's annotations become the ReplicaSet's (skipped keys kept)."""
    kept = {k: v for k, v in annotations_of(d).items() if k in ANNOTATIONS_TO_SKIP}
    kept.update({k: v for k, v in annotations_of(rollback_to).items() if k not in ANNOTATIONS_TO_SKIP})
    d.setdefault("metadata", {})["annotations"] = kept


def _append_revision_history(history: str, old_revision: str, limit: int) -> str | None:
    """history + old_revision, oldest entries dropped to fit `limit` characters (None: no room)."""
    if not history:
        return old_revision
    entries = history.split(",")
    total, start = len(history) + len(old_revision) + 1, 0
    while total > limit and start < len(entries):
        total -= len(entries[start]) + 1
        start += 1
    if total > limit:
        log.warning("not appending revision: revision-history is at its limit of %d characters", limit)
        return None
    return ",".join([*entries[start:], old_revision])


def set_new_replica_set_annotations(d: Obj, rs: Obj, new_revision: str, *, exists: bool, max_surge: int,
                                    rev_history_limit: int = MAX_REV_HISTORY_LENGTH_IN_CHARS) -> bool:
    """Bring the new ReplicaSet's annotations up to date (SetNewReplicaSetAnnotations): copy the
    Deployment's, raise its revision to `new_revision` (keeping the old one in revision-history),
    and, for a ReplicaSet about to be created, set desired/max replicas. True if `rs` changed."""
    changed = copy_deployment_annotations_to_replica_set(d, rs)
    annotations = _annotations_for_write(rs)
    old_revision = annotations.get(REVISION_ANNOTATION)
    try:
        old_int = int(old_revision) if old_revision is not None and old_revision != "" else 0
    except ValueError:
        log.warning("updating replica set revision: old revision %r is not an integer", old_revision)
        return False
    try:
        new_int = int(new_revision)
    except ValueError:
        log.warning("updating replica set revision: new revision %r is not an integer", new_revision)
        return False
    if old_int < new_int:
        annotations[REVISION_ANNOTATION] = new_revision
        changed = True
        if old_revision is not None:
            history = _append_revision_history(annotations.get(REVISION_HISTORY_ANNOTATION, ""), old_revision,
                                               rev_history_limit)
            if history is not None:
                annotations[REVISION_HISTORY_ANNOTATION] = history
    if not exists:
        replicas = replicas_of(d)
        if set_replicas_annotations(rs, replicas, replicas + max_surge):
            changed = True
    return changed


def _int_annotation(rs: Obj, key: str) -> int | None:
    value = annotations_of(rs).get(key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        log.debug("cannot convert %r of annotation %s of replica set %s", value, key, meta(rs).get("name"))
        return None


def desired_replicas_annotation(rs: Obj) -> int | None:
    return _int_annotation(rs, DESIRED_REPLICAS_ANNOTATION)


def max_replicas_annotation(rs: Obj) -> int | None:
    return _int_annotation(rs, MAX_REPLICAS_ANNOTATION)


def replicas_annotations_need_update(rs: Obj, desired: int, max_replicas: int) -> bool:
    a = annotations_of(rs)
    return a.get(DESIRED_REPLICAS_ANNOTATION) != str(desired) or a.get(MAX_REPLICAS_ANNOTATION) != str(max_replicas)


def set_replicas_annotations(rs: Obj, desired: int, max_replicas: int) -> bool:
    if not replicas_annotations_need_update(rs, desired, max_replicas):
        return False
    annotations = _annotations_for_write(rs)
    annotations[DESIRED_REPLICAS_ANNOTATION] = str(desired)
    annotations[MAX_REPLICAS_ANNOTATION] = str(max_replicas)
    return True


def get_rollback_to(d: Obj) -> int | None:
    """The revision the deprecated rollback annotation asks for (0: the previous one); None when
    there is none or it is not an integer (extensions/v1beta1's spec.rollbackTo, round-tripped)."""
    value = annotations_of(d).get(DEPRECATED_ROLLBACK_TO)
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def clear_rollback_to(d: Obj) -> None:
    annotations_of(d).pop(DEPRECATED_ROLLBACK_TO, None)


# -- templates and the hash -----------------------------------------------------------------------
def _is_empty(value: Any) -> bool:
    return value is None or value == {} or value == []


def _normalize(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _normalize(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if not _is_empty(v)}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return value


def normalized_template(template: Obj, *, drop_hash: bool = True) -> Obj:
    """The template with null/{}/[] fields dropped (and, by default, without the hash label)."""
    out: Obj = _normalize(template)
    labels = (out.get("metadata") or {}).get("labels")
    if drop_hash and isinstance(labels, dict) and DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY in labels:
        labels.pop(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY)
        if not labels:
            out["metadata"].pop("labels")
            if not out["metadata"]:
                out.pop("metadata")
    return out


def _without_hash_label(template: Obj) -> Obj:
    """A shallow view of `template` without the pod-template-hash label (nothing else changed)."""
    m = template.get("metadata")
    if not isinstance(m, dict):
        return template
    labels = m.get("labels")
    if not isinstance(labels, dict) or DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY not in labels:
        return template
    rest = {k: v for k, v in labels.items() if k != DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY}
    return {**template, "metadata": {**m, "labels": rest}}


def equal_ignore_hash(t1: Obj, t2: Obj) -> bool:
    """Two pod templates are the same apart from their pod-template-hash labels. Equal as they
    are (the usual case: a ReplicaSet made from the Deployment's template) is decided by one
    comparison; only templates that differ are normalized (empty fields dropped) and compared again."""
    if _without_hash_label(t1) == _without_hash_label(t2):
        return True
    return bool(normalized_template(t1) == normalized_template(t2))


def fnv32a(data: bytes, h: int = _FNV32_OFFSET) -> int:
    """FNV-1a, 32 bits (Go's hash/fnv New32a), continuing from `h`."""
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def safe_encode_string(s: str) -> str:
    """k8s.io/apimachinery/pkg/util/rand.SafeEncodeString: each byte to a vowel-free alphanumeric."""
    return "".join(_SAFE_ALPHANUMS[b % len(_SAFE_ALPHANUMS)] for b in s.encode())


def compute_hash(template: Obj, collision_count: int | None) -> str:
    """The pod-template-hash of `template` (see the module docstring for the hashed bytes)."""
    h = fnv32a(_encode_sorted.encode(normalized_template(template, drop_hash=False)))
    if collision_count is not None:
        h = fnv32a((collision_count & 0xFFFFFFFF).to_bytes(4, "little") + bytes(4), h)
    return safe_encode_string(str(h))


def set_from_replica_set_template(d: Obj, template: Obj) -> None:
    """The Deployment's template becomes the ReplicaSet's, minus the pod-template-hash label."""
    new_template = deep_copy(template)
    labels = (new_template.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, None)
    d.setdefault("spec", {})["template"] = new_template


# -- orders and filters ---------------------------------------------------------------------------
def by_creation_timestamp(rs: Obj) -> tuple[float, str]:
    """Sort key: oldest first, then by name (ReplicaSetsByCreationTimestamp)."""
    return creation_time(rs), str(meta(rs).get("name", ""))


def sorted_by_creation(rses: Iterable[Obj]) -> list[Obj]:
    return sorted(rses, key=by_creation_timestamp)


def _cmp(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def _by_size(a: Obj, b: Obj, *, newer_first: bool) -> int:
    if replicas_of(a) != replicas_of(b):
        return _cmp(replicas_of(b), replicas_of(a))  # larger first
    ka, kb = by_creation_timestamp(a), by_creation_timestamp(b)
    return _cmp(kb, ka) if newer_first else _cmp(ka, kb)


def sorted_by_size_older(rses: Iterable[Obj]) -> list[Obj]:
    """Larger first; among equals the older first (ReplicaSetsBySizeOlder: for scaling down)."""
    return sorted(rses, key=functools.cmp_to_key(functools.partial(_by_size, newer_first=False)))


def sorted_by_size_newer(rses: Iterable[Obj]) -> list[Obj]:
    """Larger first; among equals the newer first (ReplicaSetsBySizeNewer: for scaling up)."""
    return sorted(rses, key=functools.cmp_to_key(functools.partial(_by_size, newer_first=True)))


def _by_revision(a: Obj, b: Obj) -> int:
    ra, rb = revision(a), revision(b)
    if ra is None or rb is None or ra == rb:
        return _cmp(by_creation_timestamp(a), by_creation_timestamp(b))
    return _cmp(ra, rb)


def sorted_by_revision(rses: Iterable[Obj]) -> list[Obj]:
    """Lowest revision first (ReplicaSetsByRevision)."""
    return sorted(rses, key=functools.cmp_to_key(_by_revision))


def filter_active_replica_sets(rses: Iterable[Obj | None]) -> list[Obj]:
    """ReplicaSets with spec.replicas > 0."""
    return [rs for rs in rses if rs is not None and replicas_of(rs) > 0]


def find_new_replica_set(d: Obj, rs_list: Iterable[Obj]) -> Obj | None:
    """The oldest ReplicaSet whose template equals the Deployment's (hash label aside)."""
    template = template_of(d)
    for rs in sorted(rs_list, key=by_creation_timestamp):
        if equal_ignore_hash(template_of(rs), template):
            return rs
    return None


def find_old_replica_sets(d: Obj, rs_list: list[Obj]) -> tuple[list[Obj], list[Obj]]:
    """(old ReplicaSets with replicas, all old ReplicaSets): everything but the new one."""
    new_rs = find_new_replica_set(d, rs_list)
    new_uid = meta(new_rs).get("uid") if new_rs is not None else None
    all_old = [rs for rs in rs_list if new_rs is None or meta(rs).get("uid") != new_uid]
    return [rs for rs in all_old if replicas_of(rs) != 0], all_old


def find_active_or_latest(new_rs: Obj | None, old_rses: list[Obj]) -> Obj | None:
    """The only active ReplicaSet; the newest when none is active; None when several are."""
    if new_rs is None and not old_rses:
        return None
    newest_first = sorted(old_rses, key=by_creation_timestamp, reverse=True)
    active = filter_active_replica_sets([*newest_first, new_rs])
    if not active:
        return new_rs if new_rs is not None else newest_first[0]
    return active[0] if len(active) == 1 else None


# -- sums over ReplicaSets ------------------------------------------------------------------------
def replica_count(rses: Iterable[Obj | None]) -> int:
    """Sum of spec.replicas."""
    return sum(replicas_of(rs) for rs in rses if rs is not None)


def actual_replica_count(rses: Iterable[Obj | None]) -> int:
    return sum(status_int(rs, "replicas") for rs in rses if rs is not None)


def ready_replica_count(rses: Iterable[Obj | None]) -> int:
    return sum(status_int(rs, "readyReplicas") for rs in rses if rs is not None)


def available_replica_count(rses: Iterable[Obj | None]) -> int:
    return sum(status_int(rs, "availableReplicas") for rs in rses if rs is not None)


def has_revision_history_limit(d: Obj) -> bool:
    limit = (d.get("spec") or {}).get("revisionHistoryLimit")
    return limit is not None and int(limit) != _INT32_MAX


def has_progress_deadline(d: Obj) -> bool:
    deadline = (d.get("spec") or {}).get("progressDeadlineSeconds")
    return deadline is not None and int(deadline) != _INT32_MAX
