"""An embeddable MVCC key-value store with etcd v3 semantics, durable through a Raft log.

    from kubecore.store import Store
    with Store.open("data") as s:
        s.put(b"/a", b"1")
        print(s.get(b"/a").value)

Every blocking call has an asyncio counterpart prefixed with ``a`` (``aput``, ``arange``, ...).
"""

from kubecore._native import (
    CompactedError,
    Compare,
    CorruptionError,
    DeleteResult,
    Event,
    FutureRevisionError,
    KeyValue,
    LeaseExistsError,
    LeaseNotFoundError,
    LeaseTTL,
    LockedError,
    Op,
    PutResult,
    RangeResult,
    RequestTooLargeError,
    StoreClosedError,
    StoreError,
    StoreIOError,
    TxnResult,
    prefix_end,
)
from kubecore.store._store import Store
from kubecore.store._watch import Watch

__all__ = [
    "CompactedError",
    "Compare",
    "CorruptionError",
    "DeleteResult",
    "Event",
    "FutureRevisionError",
    "KeyValue",
    "LeaseExistsError",
    "LeaseNotFoundError",
    "LeaseTTL",
    "LockedError",
    "Op",
    "PutResult",
    "RangeResult",
    "RequestTooLargeError",
    "Store",
    "StoreClosedError",
    "StoreError",
    "StoreIOError",
    "TxnResult",
    "Watch",
    "prefix_end",
]
