"""ControllerRevision history shared by the StatefulSet and DaemonSet controllers (upstream
pkg/controller/history, plus controller.ComputeHash which the DaemonSet controller names its
revisions with).

A workload controller records each distinct pod template it has run as an apps/v1
ControllerRevision owned by it: `data` is a strategic merge patch that restores the template
(`{"spec": {"template": {..., "$patch": "replace"}}}`), `revision` a number that grows with every
new (or re-used) template. `kubectl rollout history/undo` read and apply these objects.

Names and hashes (as upstream):

    name          "<owner name, cut to 223 bytes>-<hash>"
    hash          SafeEncodeString(decimal FNV-32 of the data's JSON bytes [+ decimal collision count])
    compute_hash  SafeEncodeString(decimal FNV-32a of the template [+ 8-byte little-endian count])

`SafeEncodeString` maps every character of the decimal string to one of "bcdfghjklmnpqrstvwxz2456789"
(no vowels: no words). The JSON bytes are Go's `json.Marshal` of a map: keys sorted, no spaces,
`<`, `>`, `&`, U+2028 and U+2029 escaped (`canonical_json`); upstream hashes the raw bytes it
stored, so two revisions are equal when their canonical data bytes are.

Collisions: creating `<owner>-<hash>` may find another revision of that name with different data;
the creator then bumps the owner's `status.collisionCount`, which changes every later hash. Worked
example used by the tests: data {"a": 1} hashes to one name; if that name is taken by {"b": 2},
`ControllerHistory.create_controller_revision` retries with collision count 1, 2, ... and returns
the count it ended with, for the owner's status.

Revision numbers: `next_revision` is one more than the highest; a template equal to an older
revision re-uses that object with a new number (a rollback), so numbers are unique per owner.

History limit: `revisions_to_truncate` keeps the live revisions (current, update, and any a pod
still runs) and deletes the oldest of the rest until at most revisionHistoryLimit remain.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from typing import Any

import msgspec

from kubecore.client.errors import AlreadyExists, Conflict, Invalid, NotFound
from kubecore.client.indexer import NAMESPACE_INDEX, Indexer
from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import Selector, get_controller_of, labels_of, meta, parse_time

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CONTROLLER_REVISION_HASH_LABEL = "controller.kubernetes.io/hash"
"""Label carrying the hash of a ControllerRevision's data (upstream's ControllerRevisionHashLabel)."""
MAX_PREFIX_LENGTH = 223
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_FNV_OFFSET, _FNV_PRIME, _MASK = 0x811C9DC5, 0x01000193, 0xFFFFFFFF
_UPDATE_RETRIES = 5


# -- hashing ------------------------------------------------------------------------------------
def safe_encode_string(s: str) -> str:
    """Map each character to a consonant or digit (upstream's rand.SafeEncodeString)."""
    return "".join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in s)


def fnv32(data: bytes, h: int = _FNV_OFFSET) -> int:
    """FNV-1, 32 bits (Go's hash/fnv New32); pass `h` to continue a running hash."""
    for b in data:
        h = ((h * _FNV_PRIME) & _MASK) ^ b
    return h


def fnv32a(data: bytes, h: int = _FNV_OFFSET) -> int:
    """FNV-1a, 32 bits (Go's hash/fnv New32a)."""
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & _MASK
    return h


_GO_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
               ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def canonical_json(obj: Any) -> bytes:
    """JSON as Go's json.Marshal writes a map: sorted keys, compact, HTML characters escaped.
    (These characters can only occur inside strings, so replacing the bytes is safe.)"""
    out = msgspec.json.encode(obj, order="sorted")
    for raw, escaped in _GO_ESCAPES:
        if raw in out:
            out = out.replace(raw, escaped)
    return out


def controller_revision_name(prefix: str, hash_: str) -> str:
    """"<prefix>-<hash>", the prefix cut so the name stays within 253 bytes."""
    return f"{prefix[:MAX_PREFIX_LENGTH]}-{hash_}"


def hash_controller_revision(data: Any, probe: int | None) -> str:
    """The name hash of revision data (upstream's HashControllerRevision: FNV-1 of the data's
    bytes, then the decimal `probe`, i.e. the collision count, when there is one)."""
    h = fnv32(data if isinstance(data, bytes) else canonical_json(data))
    if probe is not None:
        h = fnv32(str(probe).encode(), h)
    return safe_encode_string(str(h))


def compute_hash(template: Any, collision_count: int | None) -> str:
    """The hash of a pod template (upstream's controller.ComputeHash: FNV-1a of the template,
    then the collision count as 8 little-endian bytes). Upstream hashes Go's in-memory struct;
    kubecore hashes the template's canonical JSON, so values differ from upstream's but follow
    the same rules."""
    h = fnv32a(canonical_json(template))
    if collision_count is not None:
        h = fnv32a((collision_count & _MASK).to_bytes(4, "little") + b"\0\0\0\0", h)
    return safe_encode_string(str(h))


# -- revisions as values --------------------------------------------------------------------------
def revision_number(rev: Obj) -> int:
    return int(rev.get("revision") or 0)


def data_bytes(rev: Obj) -> bytes:
    return canonical_json(rev.get("data"))


def new_controller_revision(parent: Obj, *, api_version: str, kind: str, template_labels: dict[str, str],
                            data: Obj, revision: int, collision_count: int | None) -> Obj:
    """An unsaved ControllerRevision of `parent` (upstream's NewControllerRevision): the
    template's labels plus the hash label, a controller reference, `data` and `revision`."""
    m = meta(parent)
    hash_ = hash_controller_revision(data, collision_count)
    labels = dict(template_labels)
    labels[CONTROLLER_REVISION_HASH_LABEL] = hash_
    owner = {"apiVersion": api_version, "kind": kind, "name": m.get("name", ""), "uid": m.get("uid", ""),
             "controller": True, "blockOwnerDeletion": True}
    rev_meta: Obj = {"name": controller_revision_name(str(m.get("name", "")), hash_), "labels": labels,
                     "ownerReferences": [owner]}
    if m.get("namespace"):
        rev_meta["namespace"] = m["namespace"]
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": rev_meta, "data": data,
            "revision": revision}


def _hash_label_int(rev: Obj) -> int | None:
    value = labels_of(rev).get(CONTROLLER_REVISION_HASH_LABEL)
    if value is None:
        return None
    try:
        parsed = int(value, 10)
    except ValueError:
        return None
    return parsed if -(2**31) <= parsed < 2**31 else None


def equal_revision(lhs: Obj | None, rhs: Obj | None) -> bool:
    """Both None, or both carry the same data (upstream's EqualRevision; hash labels that parse
    as 32-bit integers and differ decide without comparing the data)."""
    if lhs is None or rhs is None:
        return lhs is rhs
    lh, rh = _hash_label_int(lhs), _hash_label_int(rhs)
    if lh is not None and rh is not None and lh != rh:
        return False
    return data_bytes(lhs) == data_bytes(rhs)


def find_equal_revisions(revisions: Iterable[Obj], needle: Obj) -> list[Obj]:
    """Every revision equal to `needle`, in the given order."""
    return [r for r in revisions if equal_revision(r, needle)]


def _sort_key(rev: Obj) -> tuple[int, float, str]:
    created = parse_time(meta(rev).get("creationTimestamp"))
    return revision_number(rev), created if created is not None else 0.0, str(meta(rev).get("name", ""))


def sort_controller_revisions(revisions: Iterable[Obj]) -> list[Obj]:
    """By revision, then creation time, then name (upstream's byRevision, stable)."""
    return sorted(revisions, key=_sort_key)


def next_revision(sorted_revisions: list[Obj]) -> int:
    """1 for no history, else one more than the last (highest) revision."""
    return revision_number(sorted_revisions[-1]) + 1 if sorted_revisions else 1


def max_revision(revisions: Iterable[Obj]) -> int:
    return max((revision_number(r) for r in revisions), default=0)


def revisions_to_truncate(sorted_revisions: list[Obj], live: set[str], limit: int) -> list[Obj]:
    """The non-live revisions to delete so at most `limit` non-live ones remain, oldest first
    (upstream StatefulSet's truncateHistory choice; a negative limit keeps everything)."""
    history = [r for r in sorted_revisions if str(meta(r).get("name", "")) not in live]
    if limit < 0 or len(history) <= limit:
        return []
    return history[:len(history) - limit]


def adopt_patch(parent: Obj, *, api_version: str, kind: str, revision: Obj) -> Obj:
    m = meta(parent)
    return {"metadata": {"ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": m.get("name"),
                                              "uid": m.get("uid"), "controller": True,
                                              "blockOwnerDeletion": True}],
                         "uid": meta(revision).get("uid")}}


# -- revisions in the API server ----------------------------------------------------------------
class ControllerHistory:
    """Upstream's history.Interface over the API server: reads come from the ControllerRevision
    informer's cache, writes go to `client` (the apps/v1 controllerrevisions resource)."""

    def __init__(self, client: ResourceClient, indexer: Indexer) -> None:
        self.client = client
        self.indexer = indexer

    def list_controller_revisions(self, parent: Obj, selector: Selector) -> list[Obj]:
        """Cached revisions in the parent's namespace matching `selector`, owned by the parent
        or by no controller at all."""
        uid = meta(parent).get("uid")
        out = []
        for rev in self.indexer.by_index(NAMESPACE_INDEX, str(meta(parent).get("namespace") or "")):
            if not selector.matches(labels_of(rev)):
                continue
            ref = get_controller_of(rev)
            if ref is None or ref.get("uid") == uid:
                out.append(rev)
        return out

    async def create_controller_revision(self, parent: Obj, revision: Obj,
                                         collision_count: int) -> tuple[Obj, int]:
        """Create `revision` named by its data's hash; on a name taken by different data, bump
        the collision count and try the next name. Returns (the stored revision, the count)."""
        namespace = str(meta(parent).get("namespace") or "")
        clone = copy.deepcopy(revision)
        wanted = data_bytes(revision)
        count = collision_count
        while True:
            clone["metadata"]["name"] = controller_revision_name(
                str(meta(parent).get("name", "")), hash_controller_revision(wanted, count))
            try:
                return await self.client.create(clone, namespace=namespace), count
            except AlreadyExists:
                exists = await self.client.get(clone["metadata"]["name"], namespace=namespace)
                if data_bytes(exists) == wanted:
                    return exists, count
                count += 1

    async def update_controller_revision(self, revision: Obj, new_revision: int) -> Obj:
        """Set `revision`'s number, re-reading and retrying after conflicts."""
        clone = copy.deepcopy(revision)
        m = meta(clone)
        for attempt in range(_UPDATE_RETRIES):
            if revision_number(clone) == new_revision:
                return clone
            clone["revision"] = new_revision
            try:
                return await self.client.update(clone, namespace=str(m.get("namespace") or ""))
            except Conflict:
                if attempt == _UPDATE_RETRIES - 1:
                    raise
                clone = await self.client.get(str(m.get("name")), namespace=str(m.get("namespace") or ""))
        return clone  # not reached

    async def delete_controller_revision(self, revision: Obj) -> None:
        m = meta(revision)
        await self.client.delete(str(m.get("name")), namespace=str(m.get("namespace") or ""))

    async def adopt_controller_revision(self, parent: Obj, *, api_version: str, kind: str, revision: Obj) -> Obj:
        """Make `parent` the controller of an orphaned revision (refused if it has one)."""
        owner = get_controller_of(revision)
        if owner is not None:
            raise ValueError(f"attempt to adopt revision owned by {owner}")
        m = meta(revision)
        return await self.client.patch(str(m.get("name")), adopt_patch(parent, api_version=api_version, kind=kind,
                                                                       revision=revision),
                                       namespace=str(m.get("namespace") or ""), patch_type="strategic")

    async def release_controller_revision(self, parent: Obj, revision: Obj) -> Obj | None:
        """Remove `parent`'s reference from `revision` (None if the revision is gone or was not ours)."""
        m = meta(revision)
        patch = {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": meta(parent).get("uid")}],
                              "uid": m.get("uid")}}
        try:
            return await self.client.patch(str(m.get("name")), patch, namespace=str(m.get("namespace") or ""),
                                           patch_type="strategic")
        except (NotFound, Invalid):
            return None
