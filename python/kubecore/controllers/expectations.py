"""Expectations: what a controller's own writes will look like when its informer sees them, so it
never acts twice on one gap while those writes are in flight (upstream ControllerExpectations and
UIDTrackingControllerExpectations, pkg/controller/controller_utils.go).

The problem. A ReplicaSet wants 5 pods and has 0; its sync creates 5. The creates return before
the watch delivers the new pods, and any event (a status write, another pod) may trigger a
second sync that still sees 0 pods in the cache and would create 5 more. Expectations close the
gap: before writing, the sync records "expect 5 adds"; the informer's add handler calls
`creation_observed` for each pod it sees with that owner; a sync whose expectations are not met
yet only refreshes status and leaves the pod count alone.

Rules (the same as upstream's):
- `set_expectations` replaces what was there (with a fresh timestamp); counts only go down after
  that (`lower_expectations`, or the `*_observed` calls), or up via `raise_expectations`.
- `satisfied_expectations(key)` is true when nothing is recorded, when both counts are <= 0, or
  when the record is older than `timeout` (5 minutes: a lost watch event must not stall a
  controller forever). Time comes from the injected clock.
- A create that failed, or a batch never attempted, must be lowered by the caller, since no
  watch event will ever arrive for it.

Deletions are tracked by pod key (`UIDTrackingControllerExpectations`): a graceful delete is seen
twice (the update that sets deletionTimestamp, then the delete), and only the first sighting of a
key that was asked for may count. Worked example: expect_deletions("ns/rs", ["ns/a", "ns/b"]);
deletion_observed("ns/rs", "ns/a") twice lowers `delete` once, to 1; deletion_observed for
"ns/c" (not asked for) changes nothing; deletion_observed("ns/rs", "ns/b") makes it 0: satisfied.

All methods run on one event loop; none awaits, so no locks are needed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kubecore.client.clock import REAL_CLOCK, Clock

log = logging.getLogger(__name__)

EXPECTATIONS_TIMEOUT = 5 * 60.0
"""Seconds after which unmet expectations no longer block a sync (upstream's ExpectationsTimeout)."""


@dataclass
class ControlleeExpectations:
    """Adds and deletes one controller still waits for, and when they were set."""

    add: int
    delete: int
    key: str
    timestamp: float

    def fulfilled(self) -> bool:
        return self.add <= 0 and self.delete <= 0


class ControllerExpectations:
    """Controller key -> the adds/deletes it still expects to observe."""

    def __init__(self, *, clock: Clock = REAL_CLOCK, timeout: float = EXPECTATIONS_TIMEOUT) -> None:
        self._clock = clock
        self.timeout = timeout
        self._store: dict[str, ControlleeExpectations] = {}

    def get_expectations(self, key: str) -> ControlleeExpectations | None:
        return self._store.get(key)

    def delete_expectations(self, key: str) -> None:
        self._store.pop(key, None)

    def is_expired(self, exp: ControlleeExpectations) -> bool:
        return self._clock.now() - exp.timestamp > self.timeout

    def satisfied_expectations(self, key: str) -> bool:
        """True when a sync may create or delete: nothing recorded, all observed, or expired."""
        exp = self._store.get(key)
        if exp is None:
            return True
        if exp.fulfilled():
            return True
        if self.is_expired(exp):
            log.info("expectations of %s expired (add %d, delete %d)", key, exp.add, exp.delete)
            return True
        return False

    def set_expectations(self, key: str, *, add: int, delete: int) -> None:
        self._store[key] = ControlleeExpectations(add=add, delete=delete, key=key, timestamp=self._clock.now())

    def expect_creations(self, key: str, adds: int) -> None:
        self.set_expectations(key, add=adds, delete=0)

    def expect_deletions(self, key: str, deletes: int) -> None:
        self.set_expectations(key, add=0, delete=deletes)

    def lower_expectations(self, key: str, *, add: int = 0, delete: int = 0) -> None:
        exp = self._store.get(key)
        if exp is not None:
            exp.add -= add
            exp.delete -= delete

    def raise_expectations(self, key: str, *, add: int = 0, delete: int = 0) -> None:
        exp = self._store.get(key)
        if exp is not None:
            exp.add += add
            exp.delete += delete

    def creation_observed(self, key: str) -> None:
        self.lower_expectations(key, add=1)

    def deletion_observed(self, key: str) -> None:
        self.lower_expectations(key, delete=1)

    def __len__(self) -> int:
        return len(self._store)


class UIDTrackingControllerExpectations:
    """`ControllerExpectations` whose deletions are counted per pod key, at most once each.

    Invariant: for every key in `_uids`, the wrapped expectations' `delete` count equals the
    number of pod keys still in the set (until the record expires or is replaced)."""

    def __init__(self, expectations: ControllerExpectations | None = None, *, clock: Clock = REAL_CLOCK) -> None:
        self.expectations = expectations if expectations is not None else ControllerExpectations(clock=clock)
        self._uids: dict[str, set[str]] = {}

    # pass-throughs -----------------------------------------------------------------------------
    def get_expectations(self, key: str) -> ControlleeExpectations | None:
        return self.expectations.get_expectations(key)

    def satisfied_expectations(self, key: str) -> bool:
        return self.expectations.satisfied_expectations(key)

    def expect_creations(self, key: str, adds: int) -> None:
        self.expectations.expect_creations(key, adds)

    def creation_observed(self, key: str) -> None:
        self.expectations.creation_observed(key)

    def lower_expectations(self, key: str, *, add: int = 0, delete: int = 0) -> None:
        self.expectations.lower_expectations(key, add=add, delete=delete)

    # deletions by pod key ------------------------------------------------------------------------
    def get_uids(self, key: str) -> set[str] | None:
        """The pod keys `key` still waits to see deleted (None when it waits for none)."""
        return self._uids.get(key)

    def expect_deletions(self, key: str, pod_keys: list[str]) -> None:
        existing = self._uids.get(key)
        if existing:
            log.error("clobbering existing delete keys of %s: %s", key, sorted(existing))
        expected = set(pod_keys)
        self._uids[key] = expected
        self.expectations.expect_deletions(key, len(expected))

    def deletion_observed(self, key: str, pod_key: str) -> None:
        """Count the deletion of `pod_key` for `key`, once, if `key` asked for it."""
        uids = self._uids.get(key)
        if uids is not None and pod_key in uids:
            uids.discard(pod_key)
            self.expectations.deletion_observed(key)

    def delete_expectations(self, key: str) -> None:
        self.expectations.delete_expectations(key)
        self._uids.pop(key, None)
