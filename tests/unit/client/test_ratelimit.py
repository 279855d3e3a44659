"""Rate limiters: the delays client-go's default_rate_limiters.go gives, on a fake clock."""

from __future__ import annotations

import pytest

from kubecore.client.clock import FakeClock
from kubecore.client.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_per_item_and_forget_resets() -> None:
    rl = ItemExponentialFailureRateLimiter[str](0.001, 1.0)
    assert [rl.when("a") for _ in range(5)] == pytest.approx([0.001, 0.002, 0.004, 0.008, 0.016])
    assert rl.num_requeues("a") == 5
    assert rl.when("b") == pytest.approx(0.001)  # items are independent
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert rl.when("a") == pytest.approx(0.001)


def test_exponential_is_capped_and_never_overflows() -> None:
    rl = ItemExponentialFailureRateLimiter[str](0.005, 1000.0)
    delays = [rl.when("x") for _ in range(2000)]
    assert delays[0] == pytest.approx(0.005)
    assert max(delays) == 1000.0
    assert delays[-1] == 1000.0
    assert delays == sorted(delays)


def test_defaults_are_5ms_to_1000s() -> None:
    rl = ItemExponentialFailureRateLimiter[str]()
    assert rl.when("k") == pytest.approx(0.005)
    for _ in range(40):
        rl.when("k")
    assert rl.when("k") == 1000.0


def test_fast_slow() -> None:
    rl = ItemFastSlowRateLimiter[str](0.005, 10.0, max_fast_attempts=3)
    assert [rl.when("a") for _ in range(5)] == [0.005, 0.005, 0.005, 10.0, 10.0]
    assert rl.num_requeues("a") == 5
    rl.forget("a")
    assert rl.when("a") == 0.005


def test_bucket_burst_then_qps() -> None:
    clock = FakeClock()
    rl = BucketRateLimiter[str](10.0, 3, clock=clock)
    assert [rl.when("x") for _ in range(3)] == [0.0, 0.0, 0.0]  # the burst
    assert rl.when("x") == pytest.approx(0.1)  # in debt by one token at 10/s
    assert rl.when("y") == pytest.approx(0.2)  # the bucket is shared by all items
    clock.advance(0.2)  # debt repaid exactly
    assert rl.when("z") == pytest.approx(0.1)
    clock.advance(100.0)  # refills to the burst, not beyond
    assert [rl.when("x") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert rl.when("x") > 0
    assert rl.num_requeues("x") == 0


def test_bucket_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter[str](0.0, 1)
    with pytest.raises(ValueError):
        BucketRateLimiter[str](1.0, 0)


def test_max_of_takes_worst_and_forgets_all() -> None:
    rl = MaxOfRateLimiter[str](
        ItemExponentialFailureRateLimiter[str](0.001, 1.0),
        ItemFastSlowRateLimiter[str](0.003, 5.0, max_fast_attempts=2),
    )
    assert rl.when("a") == pytest.approx(0.003)  # max(0.001, 0.003)
    assert rl.when("a") == pytest.approx(0.003)  # max(0.002, 0.003)
    assert rl.when("a") == pytest.approx(5.0)  # slow now
    assert rl.num_requeues("a") == 3
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert rl.when("a") == pytest.approx(0.003)


def test_with_max_wait_caps() -> None:
    rl = WithMaxWaitRateLimiter[str](ItemExponentialFailureRateLimiter[str](1.0, 100.0), 3.0)
    assert [rl.when("a") for _ in range(4)] == [1.0, 2.0, 3.0, 3.0]
    assert rl.num_requeues("a") == 4


def test_default_controller_rate_limiter() -> None:
    clock = FakeClock()
    rl = default_controller_rate_limiter(clock=clock)
    # per-item backoff dominates for one item while the bucket has tokens
    assert rl.when("a") == pytest.approx(0.005)
    assert rl.when("a") == pytest.approx(0.010)
    # 98 more distinct items exhaust the 100-token burst; the next waits 1/10 s for a token
    for i in range(98):
        assert rl.when(f"i{i}") == pytest.approx(0.005)
    assert rl.when("late") == pytest.approx(0.1)
    assert rl.when("later") == pytest.approx(0.2)
    rl.forget("a")
    assert rl.num_requeues("a") == 0
