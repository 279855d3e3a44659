"""Leases (etcd lease/lessor.go): grant, attach, keepalive, revoke, expiry."""

from __future__ import annotations

import time

import pytest

from kubecore.store import LeaseNotFoundError, LeaseTTL, Store, StoreError


def test_grant_returns_distinct_positive_ids(store: Store) -> None:
    ids = [store.lease_grant(3600) for _ in range(20)]
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(set(ids)) == 20
    assert sorted(store.leases()) == sorted(ids)


def test_grant_does_not_bump_revision(store: Store) -> None:
    rev = store.put(b"a", b"1").revision
    store.lease_grant(60)
    assert store.revision == rev


def test_time_to_live_and_keepalive(store: Store) -> None:
    lease = store.lease_grant(120)
    info = store.lease_time_to_live(lease)
    assert isinstance(info, LeaseTTL)
    assert info.id == lease
    assert info.granted_ttl == 120
    assert 0 < info.ttl <= 120
    assert info.ttl >= 100  # it was granted a moment ago
    assert store.lease_keepalive(lease) == 120
    info = store.lease_time_to_live(lease)
    assert 100 <= info.ttl <= 120


def test_put_attaches_key_to_lease(store: Store) -> None:
    lease = store.lease_grant(3600)
    store.put(b"k1", b"v", lease=lease)
    store.put(b"k2", b"v", lease=lease)
    store.put(b"free", b"v")
    assert store.get(b"k1").lease == lease  # type: ignore[union-attr]
    assert store.get(b"free").lease == 0  # type: ignore[union-attr]
    info = store.lease_time_to_live(lease, keys=True)
    assert sorted(info.keys) == [b"k1", b"k2"]


def test_put_without_lease_detaches_key(store: Store) -> None:
    lease = store.lease_grant(3600)
    store.put(b"k", b"1", lease=lease)
    store.put(b"k", b"2")  # etcd: lease 0 on put detaches
    assert store.get(b"k").lease == 0  # type: ignore[union-attr]
    assert list(store.lease_time_to_live(lease, keys=True).keys) == []
    rev = store.revision
    store.lease_revoke(lease)
    assert store.get(b"k") is not None
    assert store.revision == rev  # nothing attached: revoke deletes nothing, no new revision


def test_move_key_between_leases(store: Store) -> None:
    l1 = store.lease_grant(3600)
    l2 = store.lease_grant(3600)
    store.put(b"k", b"1", lease=l1)
    store.put(b"k", b"2", lease=l2)
    assert list(store.lease_time_to_live(l1, keys=True).keys) == []
    assert list(store.lease_time_to_live(l2, keys=True).keys) == [b"k"]
    store.lease_revoke(l1)
    assert store.get(b"k") is not None
    store.lease_revoke(l2)
    assert store.get(b"k") is None


def test_deleted_key_leaves_lease(store: Store) -> None:
    lease = store.lease_grant(3600)
    store.put(b"a", b"1", lease=lease)
    store.put(b"b", b"1", lease=lease)
    store.delete(b"a")
    assert list(store.lease_time_to_live(lease, keys=True).keys) == [b"b"]


def test_revoke_deletes_attached_keys_in_one_revision(store: Store) -> None:
    lease = store.lease_grant(3600)
    for i in range(5):
        store.put(b"leased/%d" % i, b"v", lease=lease)
    before = store.put(b"other", b"v").revision
    store.lease_revoke(lease)
    assert store.revision == before + 1
    assert [kv.key for kv in store.range(b"\0", b"\0").kvs] == [b"other"]
    assert store.range(b"leased/", b"leased0", revision=before).count == 5
    assert lease not in store.leases()
    # history: every leased key was deleted at revision 7 (visible through a watch replay)
    with store.watch(b"leased/", b"leased0", start_revision=before + 1) as w:
        events: list = []
        deadline = time.monotonic() + 10
        while len(events) < 5 and time.monotonic() < deadline:
            events.extend(w.poll(timeout=1))
    assert sorted(e.kv.key for e in events) == [b"leased/%d" % i for i in range(5)]
    assert all(e.type == "DELETE" and e.kv.mod_revision == before + 1 for e in events)


def test_unknown_lease_errors(store: Store) -> None:
    assert issubclass(LeaseNotFoundError, StoreError)
    with pytest.raises(LeaseNotFoundError):
        store.lease_keepalive(424242)
    with pytest.raises(LeaseNotFoundError):
        store.lease_revoke(424242)
    with pytest.raises(LeaseNotFoundError):
        store.lease_time_to_live(424242)


def test_put_with_unknown_lease_changes_nothing(store: Store) -> None:
    rev = store.put(b"k", b"1").revision
    with pytest.raises(LeaseNotFoundError):
        store.put(b"k", b"2", lease=424242)
    with pytest.raises(LeaseNotFoundError):
        store.put(b"new", b"2", lease=424242)
    assert store.revision == rev
    assert store.get(b"k").value == b"1"  # type: ignore[union-attr]
    assert store.get(b"new") is None


def test_revoked_lease_is_gone(store: Store) -> None:
    lease = store.lease_grant(3600)
    store.lease_revoke(lease)
    assert lease not in store.leases()
    with pytest.raises(LeaseNotFoundError):
        store.lease_revoke(lease)
    with pytest.raises(LeaseNotFoundError):
        store.lease_keepalive(lease)
    with pytest.raises(LeaseNotFoundError):
        store.put(b"k", b"v", lease=lease)


def test_lease_expiry_deletes_keys_in_one_revision(store: Store, wait_until) -> None:
    lease = store.lease_grant(1)
    keep = store.lease_grant(3600)
    store.put(b"e/1", b"v", lease=lease)
    store.put(b"e/2", b"v", lease=lease)
    store.put(b"e/3", b"v", lease=lease)
    before = store.put(b"kept", b"v", lease=keep).revision
    wait_until(lambda: store.get(b"e/1") is None, timeout=10, what="leased key to expire")
    wait_until(lambda: lease not in store.leases(), timeout=5, what="lease to disappear")
    assert store.revision == before + 1
    assert store.range(b"e/", b"e0").count == 0
    assert store.range(b"e/", b"e0", revision=before).count == 3
    assert store.get(b"kept") is not None
    assert keep in store.leases()
    with pytest.raises(LeaseNotFoundError):
        store.lease_time_to_live(lease)


def test_keepalive_prevents_expiry(store: Store, wait_until) -> None:
    lease = store.lease_grant(3)
    store.put(b"alive", b"v", lease=lease)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        assert store.lease_keepalive(lease) == 3
        assert store.get(b"alive") is not None
        time.sleep(0.25)
    assert lease in store.leases()
    # stop renewing: it expires
    wait_until(lambda: store.get(b"alive") is None, timeout=12, what="lease to expire after keepalives stop")
