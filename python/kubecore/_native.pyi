"""Type stubs for ``kubecore._native``, the compiled bindings built from ``rust/py/src/*.rs``.

Kept in step with the Rust by ``python -m mypy.stubtest kubecore._native`` (see
``tests/unit/test_native_stubs.py``). Every parameter that the Rust ``#[pyo3(signature = ...)]``
does not mark keyword-only may also be passed by keyword, so none is positional-only here.
"""

import os
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias, final

__all__ = [
    "StoreError",
    "CompactedError",
    "FutureRevisionError",
    "LeaseNotFoundError",
    "LeaseExistsError",
    "StoreClosedError",
    "CorruptionError",
    "LockedError",
    "RequestTooLargeError",
    "StoreIOError",
    "NativeStore",
    "NativeWatch",
    "NativeWatchCache",
    "NativeResourceCache",
    "NativeCacheWatcher",
    "NativeListBody",
    "KeyValue",
    "PutResult",
    "RangeResult",
    "DeleteResult",
    "TxnResult",
    "LeaseTTL",
    "Event",
    "Compare",
    "Op",
    "prefix_end",
    "FieldPathError",
    "FieldFacts",
    "NATIVE_FILTER_PLUGINS",
    "NATIVE_SCORE_PLUGINS",
    "NativeSchedProfile",
    "NativeSchedSnapshot",
    "NativeScheduleResult",
    "shape_key",
    "NativeFieldModel",
]

_CompareOp: TypeAlias = Literal["=", "!=", "<", ">"]
# One entry of NativeStore.drain(): (token, ok, value). With ok=True, value is what the matching
# blocking call returns (PutResult, DeleteResult, TxnResult, an int lease id, or None); with
# ok=False it is the exception (a StoreError subclass or ValueError). Typed Any because callers
# (kubecore.store._bridge) hand it to Future.set_result / set_exception depending on ok.
_Completion: TypeAlias = tuple[int, bool, Any]
# A field path of kubecore.api.managedfields: (("f", "spec"), ("k", '{"name":"main"}'), ...).
_Path: TypeAlias = tuple[tuple[str, Any], ...]

def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key that starts with `prefix` (b"\\0" when none is)."""

# ---- exceptions (errors.rs) -----------------------------------------------------------------

class StoreError(Exception):
    """Base class of every store error."""

class CompactedError(StoreError):
    """The requested revision has been compacted; see `compact_revision`."""

    compact_revision: int

class FutureRevisionError(StoreError):
    """The requested revision is newer than the store's; see `current_revision`."""

    current_revision: int

class LeaseNotFoundError(StoreError):
    """No lease with this id exists (never granted, revoked or expired)."""

    lease_id: int

class LeaseExistsError(StoreError):
    """A lease with this id already exists."""

    lease_id: int

class StoreClosedError(StoreError):
    """The store (or the watch) has been closed."""

class CorruptionError(StoreError):
    """The data directory is damaged; the message names the file and offset."""

class LockedError(StoreError):
    """The data directory is held by another open store."""

class RequestTooLargeError(StoreError):
    """The request is larger than max_request_bytes."""

    size: int
    limit: int

class StoreIOError(StoreError):
    """An I/O error in the data directory."""

# ---- results and events (types.rs) ----------------------------------------------------------

@final
class KeyValue:
    def __new__(
        cls, key: bytes, value: bytes, create_revision: int, mod_revision: int, version: int, lease: int = 0
    ) -> KeyValue: ...
    @property
    def key(self) -> bytes: ...
    @property
    def value(self) -> bytes: ...
    @property
    def create_revision(self) -> int: ...
    @property
    def mod_revision(self) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def lease(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class PutResult:
    def __new__(cls, revision: int, prev_kv: KeyValue | None = None) -> PutResult: ...
    @property
    def revision(self) -> int: ...
    @property
    def prev_kv(self) -> KeyValue | None: ...

@final
class RangeResult:
    @property
    def kvs(self) -> list[KeyValue]: ...
    @property
    def more(self) -> bool: ...
    @property
    def count(self) -> int: ...
    @property
    def revision(self) -> int: ...

@final
class DeleteResult:
    @property
    def deleted(self) -> int: ...
    @property
    def revision(self) -> int: ...
    @property
    def prev_kvs(self) -> list[KeyValue]: ...

@final
class TxnResult:
    @property
    def succeeded(self) -> bool: ...
    @property
    def revision(self) -> int: ...
    @property
    def responses(self) -> list[PutResult | RangeResult | DeleteResult]:
        """One result per op of the branch that ran, in order."""

@final
class LeaseTTL:
    @property
    def id(self) -> int: ...
    @property
    def ttl(self) -> int: ...
    @property
    def granted_ttl(self) -> int: ...
    @property
    def keys(self) -> list[bytes]:
        """The keys attached to the lease; empty unless asked for with ``keys=True``."""

@final
class Event:
    """One change seen by a watch. `prev_kv` is filled only for watches that asked for it."""

    @property
    def type(self) -> Literal["PUT", "DELETE"]: ...
    @property
    def kv(self) -> KeyValue: ...
    @property
    def prev_kv(self) -> KeyValue | None: ...
    @property
    def revision(self) -> int:
        """The revision of the change (kv.mod_revision), without building the key-value."""

# ---- transaction parts (requests.rs) --------------------------------------------------------

@final
class Compare:
    @staticmethod
    def value(key: bytes, op: _CompareOp, target: bytes) -> Compare: ...
    @staticmethod
    def version(key: bytes, op: _CompareOp, target: int) -> Compare: ...
    @staticmethod
    def create_revision(key: bytes, op: _CompareOp, target: int) -> Compare: ...
    @staticmethod
    def mod_revision(key: bytes, op: _CompareOp, target: int) -> Compare: ...
    @staticmethod
    def lease(key: bytes, op: _CompareOp, target: int) -> Compare: ...

@final
class Op:
    @staticmethod
    def put(key: bytes, value: bytes, *, lease: int = 0, prev_kv: bool = False) -> Op: ...
    @staticmethod
    def get(key: bytes, *, revision: int = 0) -> Op: ...
    @staticmethod
    def range(
        start: bytes,
        end: bytes | None = None,
        *,
        revision: int = 0,
        limit: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
    ) -> Op: ...
    @staticmethod
    def delete(key: bytes, end: bytes | None = None, *, prev_kv: bool = False) -> Op: ...

# ---- the store (store.rs) and its watches (watch.rs) ----------------------------------------

@final
class NativeStore:
    @staticmethod
    def open(
        path: str | os.PathLike[str] | None,
        *,
        fsync: bool = True,
        max_request_bytes: int = 1572864,
        snapshot_every: int = 100000,
        watch_buffer: int = 8192,
    ) -> NativeStore:
        """Opens the store in `path` (None: in memory only)."""

    def get(self, key: bytes, *, revision: int = 0) -> KeyValue | None: ...
    def mod_revision(self, key: bytes) -> int | None: ...
    def signature(self, start: bytes, end: bytes | None = None) -> tuple[int, int]: ...
    def range(
        self,
        start: bytes,
        end: bytes | None = None,
        *,
        revision: int = 0,
        limit: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
    ) -> RangeResult: ...
    def put(self, key: bytes, value: bytes, *, lease: int = 0, prev_kv: bool = False) -> PutResult: ...
    def delete(self, key: bytes, end: bytes | None = None, *, prev_kv: bool = False) -> DeleteResult: ...
    def txn(self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op]) -> TxnResult: ...
    def compact(self, revision: int) -> None: ...
    def lease_grant(self, ttl: int, *, id: int = 0) -> int: ...
    def lease_revoke(self, id: int) -> None: ...
    def lease_keepalive(self, id: int) -> int: ...
    def lease_time_to_live(self, id: int, *, keys: bool = False) -> LeaseTTL: ...
    def leases(self) -> list[int]: ...

    # Asynchronous writes: each returns at once; the result arrives through drain() under `token`.
    def submit_put(self, token: int, key: bytes, value: bytes, lease: int = 0, prev_kv: bool = False) -> None: ...
    def submit_delete(self, token: int, key: bytes, end: bytes | None = None, prev_kv: bool = False) -> None: ...
    def submit_txn(self, token: int, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op]) -> TxnResult | None:
        """Submits a transaction that writes (returns None); a read-only one is answered at once: returns
        its TxnResult and nothing arrives through drain()."""

    def submit_compact(self, token: int, revision: int) -> None: ...
    def submit_lease_grant(self, token: int, ttl: int, id: int = 0) -> None: ...
    def submit_lease_revoke(self, token: int, id: int) -> None: ...
    def flush(self) -> int:
        """Proposes every submitted write not yet proposed, as one batch; returns how many."""
    def completion_fd(self) -> int:
        """The eventfd that becomes readable when drain() has something."""

    def drain(self) -> tuple[list[_Completion], list[int]]:
        """([(token, ok, result_or_exception)], [watch ids with news]) since the last call."""

    def watch(
        self,
        key: bytes,
        end: bytes | None = None,
        *,
        start_revision: int = 0,
        prev_kv: bool = False,
        notify: bool = False,
    ) -> NativeWatch:
        """A watch on [key, end) from `start_revision`; with `notify`, its news is announced through
        completion_fd()/drain() (for asyncio)."""

    @property
    def revision(self) -> int: ...
    @property
    def compact_revision(self) -> int: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...

@final
class NativeWatch:
    @property
    def id(self) -> int: ...
    def poll(self, max_events: int = 1024, timeout: float | None = None) -> list[Event] | None:
        """Up to `max_events` events; waits up to `timeout` seconds (negative: until there are some).
        Returns [] on timeout and None once the watch is cancelled or its store closed; raises
        CompactedError when the events it still had to deliver were compacted away."""

    def cancel(self) -> None: ...

# ---- the watch cache (watchcache.rs) --------------------------------------------------------

# A selectable field: (label, "s" | "i" | "b", alternative JSON paths of str | int segments).
_FieldSpec: TypeAlias = tuple[str, str, Sequence[Sequence[str | int]]]
# A label requirement (key, op, values) with op one of =, ==, !=, in, notin, exists, !, gt, lt.
_LabelReq: TypeAlias = tuple[str, str, Sequence[str]]
# A field term (label, op, value) with op one of =, ==, !=.
_FieldTerm: TypeAlias = tuple[str, str, str]

@final
class NativeWatchCache:
    def __new__(
        cls, store: NativeStore, *, ring_capacity: int = 8192, watcher_buffer: int = 10000, max_snapshots: int = 16
    ) -> NativeWatchCache: ...
    def resource(
        self, prefix: bytes, *, kind: str, api_version: str, fields: Sequence[_FieldSpec]
    ) -> NativeResourceCache:
        """Lists `prefix` from the store and starts caching it. `fields`: the kind's selectable
        fields as (label, "s" | "i" | "b", [path, ...]), a path being a list of str | int."""

    def completion_fd(self) -> int:
        """The eventfd that becomes readable when drain() has something."""

    def drain(self) -> list[int]:
        """Ids of the watchers with news (or that ended) since the last call."""

    def close(self) -> None:
        """Stops the feeding thread; every watcher ends. Idempotent."""

@final
class NativeListBody:
    """One LIST body handed out in chunks (`next_chunk`); `len(body)` is the whole length."""

    @property
    def revision(self) -> int: ...
    def __len__(self) -> int: ...
    def next_chunk(self, max_bytes: int) -> bytes | None:
        """The next part of the body (about `max_bytes`, at least one object); None at the end."""

@final
class NativeResourceCache:
    @property
    def revision(self) -> int:
        """Every change under the prefix up to this revision has been applied."""

    @property
    def oldest_revision(self) -> int:
        """The oldest start revision a watch can be served from."""

    def __len__(self) -> int: ...
    def sync(self) -> int:
        """Catches up with the store's current revision (a consistent read); returns the revision."""

    def list(
        self,
        prefix: bytes,
        *,
        head: bytes,
        labels: Sequence[_LabelReq] = ...,
        fields: Sequence[_FieldTerm] = ...,
        limit: int = 0,
        continue_revision: int = 0,
        continue_key: bytes | None = None,
    ) -> tuple[bytes, int] | None:
        """One LIST page as the whole response body (`head` + list metadata + items), and its
        revision; None when the continue token's snapshot is no longer kept."""

    def list_body(
        self,
        prefix: bytes,
        *,
        head: bytes,
        labels: Sequence[_LabelReq] = ...,
        fields: Sequence[_FieldTerm] = ...,
        limit: int = 0,
        continue_revision: int = 0,
        continue_key: bytes | None = None,
    ) -> NativeListBody | None:
        """The same page as `list`, as a body to be taken in chunks (a big LIST goes to the socket
        while the rest is assembled); None when the continue token's snapshot is no longer kept."""

    def watch(
        self,
        prefix: bytes,
        *,
        labels: Sequence[_LabelReq] = ...,
        fields: Sequence[_FieldTerm] = ...,
        start_revision: int = 0,
        initial: bool = False,
        initial_end_bookmark: bool = False,
    ) -> NativeCacheWatcher | None:
        """A watcher: after `start_revision`, or (initial=True) the current objects as ADDED first,
        then an initial-events-end BOOKMARK if asked. None when `start_revision` is older than
        the ring (`oldest_revision`)."""

@final
class NativeCacheWatcher:
    @property
    def id(self) -> int: ...
    def poll(self, max_bytes: int = 1048576) -> bytes | None:
        """Pending frames joined (about `max_bytes`), b"" when there are none (wait for the id to
        come out of drain()), None once the watcher has ended (see `end_reason`)."""

    @property
    def end_reason(self) -> str | None:
        """Why the watcher ended ("cancelled", "too_slow", "closed", "reset"), or None."""

    def progress(self) -> int | None:
        """The revision a BOOKMARK may carry now (None while something is pending)."""

    def cancel(self) -> None: ...

# ---- field sets (rust/py/src/fieldpath.rs) -------------------------------------------------------

class FieldPathError(ValueError):
    """An object that cannot be turned into field paths (a keyed list item without its key)."""

@final
class FieldFacts:
    """One kind's list and map facts (kubecore.api.typefacts' rules over its name tables, or a
    custom resource's structural schema) and the walkers over them."""

    def __new__(
        cls,
        group: str,
        kind: str,
        *,
        typed: bool,
        keyed: dict[str, tuple[list[str], bool]],
        container_ports: Sequence[str],
        service_ports: Sequence[str],
        container_fields: Sequence[str],
        atomic_maps: Sequence[str],
        key_defaults: dict[str, str],
        schema: bytes | None = None,
    ) -> FieldFacts: ...
    def field_set(self, obj: bytes, skip: Sequence[str]) -> set[_Path]:
        """ToFieldSet of `obj` (the JSON of a map), outside the top-level fields `skip`.
        Raises FieldPathError, ValueError (not JSON), RecursionError (nested too deep)."""

    def compare(
        self, lhs: bytes | None, rhs: bytes | None, skip: Sequence[str]
    ) -> tuple[set[_Path], set[_Path], set[_Path]]:
        """typed.Compare from `lhs` to `rhs` (JSON; None: absent): (added, modified, removed)."""

# ---- scheduler kernels (rust/py/src/sched.rs over rust/sched) -------------------------------------

NATIVE_FILTER_PLUGINS: tuple[str, ...]
"""Filter plugins the kernels run, in upstream's default order: NodeUnschedulable, NodeName,
TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity."""
NATIVE_SCORE_PLUGINS: tuple[str, ...]
"""Score plugins the kernels run: TaintToleration, NodeAffinity, PodTopologySpread,
InterPodAffinity, NodeResourcesFit, NodeResourcesBalancedAllocation, ImageLocality."""

@final
class NativeSchedProfile:
    """One scheduler profile's native plugin set, built once from the KubeSchedulerConfiguration.
    `fit_resources` / `balanced_resources` default to cpu and memory with weight 1; `rtc_shape` is
    (utilization 0-100, score 0-10) points; `percentage_of_nodes_to_score` 0 is upstream's adaptive
    rule. `hard_pod_affinity_weight` (0-100) and `ignore_preferred_terms_of_existing_pods` are
    InterPodAffinityArgs; `added_affinity` is NodeAffinityArgs.addedAffinity as the JSON of a
    v1.NodeAffinity (a term that does not parse is an error). Raises ValueError for an unknown
    plugin, strategy or an invalid argument."""

    def __new__(
        cls,
        *,
        filters: Sequence[str],
        scores: Sequence[tuple[str, int]],
        fit_strategy: str = "LeastAllocated",
        fit_resources: Sequence[tuple[str, int]] | None = None,
        rtc_shape: Sequence[tuple[int, int]] | None = None,
        ignored_resources: Sequence[str] | None = None,
        ignored_resource_groups: Sequence[str] | None = None,
        balanced_resources: Sequence[tuple[str, int]] | None = None,
        percentage_of_nodes_to_score: int = 0,
        hard_pod_affinity_weight: int = 1,
        ignore_preferred_terms_of_existing_pods: bool = False,
        added_affinity: bytes | None = None,
    ) -> NativeSchedProfile: ...

@final
class NativeScheduleResult:
    """One scheduling cycle's native outcome."""

    @property
    def node(self) -> str | None:
        """The selected node (None when nothing is feasible or select=False)."""

    @property
    def feasible(self) -> list[str]:
        """Feasible nodes found (at most numFeasibleNodesToFind), in evaluation order."""

    @property
    def scores(self) -> list[int]:
        """Weighted total native score per feasible node (same order); [] with at most one."""

    @property
    def evaluated(self) -> int:
        """Nodes whose filters ran."""

    @property
    def reasons(self) -> dict[str, int]:
        """Upstream reason string -> number of nodes that failed with it."""

    @property
    def unresolvable(self) -> int:
        """Nodes that failed with UnschedulableAndUnresolvable (preemption cannot help)."""

    @property
    def rejected(self) -> str | None:
        """The message of a native PreFilter that rejected the pod on every node (NodeAffinity's
        "pod affinity terms conflict", InterPodAffinity's "parsing pod: ..."): upstream's
        Diagnosis.PreFilterMsg. Every node is also counted under it in `reasons`."""

    @property
    def error(self) -> str | None:
        """A plugin's Error status that ended the cycle (InterPodAffinity's PreScore); only in
        `schedule_batch` results (`schedule` raises RuntimeError instead)."""

@final
class NativeSchedSnapshot:
    """Nodes as columns + the pods counted on them (bound or assumed). Every call releases the GIL.
    `seed` makes the choice among equal top scores reproducible (None: random). Pod JSON may carry
    `resolvedNamespaces: [...]` in a pod affinity term: the namespaces its namespaceSelector
    selects (the kernels see no Namespace objects; `{}` selects all without it)."""

    def __new__(cls, *, seed: int | None = None) -> NativeSchedSnapshot: ...
    def set_node(self, node_json: bytes) -> None:
        """Insert or replace a node (by metadata.name). ValueError for bad JSON or quantities."""

    def remove_node(self, name: str) -> bool:
        """Remove a node; its pods stay counted and return with a node of the same name."""

    def add_pod(self, key: str, pod_json: bytes, node: str) -> None:
        """Count a pod ("ns/name") on `node` (replacing the same key); a node not yet known
        counts it when it arrives."""

    def remove_pod(self, key: str) -> bool: ...
    def nominate(self, pods: list[tuple[str, bytes, str]]) -> int:
        """Count exactly these (key, pod JSON, node) as nominated pods until `end_nominated`,
        adding and removing only what changed since the last cycle (a key counted as a real pod
        is skipped); how many are counted."""

    def end_nominated(self) -> None:
        """The cycle's nominated pods stop counting: any later call except `set_node`,
        `remove_node`, `add_pod`, `remove_pod` and `nominate` takes them off first."""

    def node_count(self) -> int: ...
    def pod_count(self) -> int: ...
    def node_names(self) -> list[str]:
        """Node names in the order a cycle visits them (zones interleaved)."""

    def schedule(self, profile: NativeSchedProfile, pod_json: bytes, *, select: bool = True) -> NativeScheduleResult:
        """One cycle's Filter + Score over the nodes (rayon, GIL released); select=False skips
        host selection (the caller scores: the search is for numFeasibleNodesToFind nodes even
        without native Score plugins; with select=True and none, one feasible node ends it).
        RuntimeError when a plugin's Error status ends the cycle."""

    def schedule_batch(
        self, profile: NativeSchedProfile, pods: Sequence[tuple[str, bytes]]
    ) -> list[NativeScheduleResult]:
        """Pods in order; each placed pod is counted on its node before the next. All pods are
        parsed first: a bad one raises ValueError before anything is counted."""

    def filter_node(
        self, profile: NativeSchedProfile, pod_json: bytes, node: str, *, without: Sequence[str] | None = None
    ) -> list[str]:
        """Reasons the pod does not fit `node` with the pods `without` (keys) removed; [] fits.
        KeyError for an unknown node."""

    def dry_run_lower(
        self, profile: NativeSchedProfile, pod_json: bytes, nodes: Sequence[str]
    ) -> tuple[bytes, list[tuple[list[str], bool]]]:
        """Preemption's first dry run per node, every pod of lower priority removed (nodes in
        parallel): one byte per node (0 no such pod, 1 fits, 2 rejected) and, per rejected node
        in order, (reasons, unresolvable). KeyError for an unknown node."""

    def reprieve(
        self, profile: NativeSchedProfile, pod_json: bytes, nodes: Sequence[tuple[str, Sequence[str]]]
    ) -> list[list[int]]:
        """Per (node, pod keys in reprieve order), all removed at first: each pod is put back in
        order and kept if the pod still fits; the indices of the others (the victims)."""

    def preempt_select(
        self, profile: NativeSchedProfile, pod_json: bytes, nodes: Sequence[tuple[str, bool]], wanted: int,
        now: float
    ) -> tuple[tuple[str, list[str]] | None, int, int, list[tuple[str, list[str], bool]]]:
        """Preemption without PDBs in one call: nodes (name, status implicit) in visiting order,
        the first `wanted` that fit are the candidates; ((node, victim keys) or None, candidates,
        classified potential nodes, [(node, reasons, unresolvable)] when there is no candidate)."""

    def requested(self, node: str) -> dict[str, int]:
        """cpu (millicores), memory/ephemeral-storage (bytes), pods (count), scalar resources."""

    def allocatable(self, node: str) -> dict[str, int]: ...

# ---- object walks for the create path (rust/py/src/objwalk.rs) ------------------------------------

def shape_key(obj: dict[str, Any], skip_meta: frozenset[str]) -> bytes | None:
    """kubecore.api.fieldmanager's create memo key: the structure of `obj` (scalars outside lists
    as their type, lists whole, obj["metadata"] last without the keys in `skip_meta`); equal for
    two objects exactly when the Python key is. None when `obj` or its metadata is not an exact
    dict, or it holds what a JSON decoder does not make (a subclass, a tuple, a key that is not a
    str, a lone surrogate in a key or a list) or nests more than 200 deep."""

@final
class NativeFieldModel:
    """A kubecore.api.fieldvalidation `Node` tree compiled once (its `known`, `inner` and `spec`
    read as `fast_count` reads them; nodes shared or recursive are compiled once)."""

    def __new__(cls, node: Any) -> NativeFieldModel: ...
    def count(self, obj: dict[str, Any]) -> int | None:
        """`fast_count(obj, node)`: the keys of `obj` when it has no unknown field, else -1. None
        when `obj` is not an exact dict or holds what only the Python version decides (a key
        that is not an exact str or has a lone surrogate, an object nested more than 200 deep)."""

    def __len__(self) -> int:
        """How many messages the model holds."""
