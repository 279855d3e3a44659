"""The cyclic garbage collector, tuned for kubecore's long-running processes.

A server or controller allocates thousands of short-lived containers per request or event
(decoded JSON, response pieces), which reference counting frees; the cyclic collector's default
thresholds (a young collection every 700 allocations, a full one every 100 young ones) then spend
a large share of the process re-scanning the long-lived objects it caches (watch caches, informer
stores, node state): measured at about a tenth of the API server's time, and a quarter of the
scheduler's while it decodes a burst of pod events.

- `tune_collector()`: young collections every 100,000 allocations, 20 young per middle, 20 middle
  per full. Call it at process start. A young collection walks the young objects still alive,
  which in a busy process are mostly the requests and events in flight, whatever the threshold:
  so fewer collections cost proportionally less. At 20,000 the scheduler still spent about a
  quarter of its time collecting under scheduler_perf's SchedulingBasic (measured by running it
  with the collector disabled); at 100,000 the difference was within run-to-run noise. Garbage
  in cycles waits longer, at most 100,000 objects of it.
- `settle_heap()`: once start-up has built what the process keeps (registry, schemas, the first
  LIST of every informer), collect once and move everything alive to the permanent generation
  (`gc.freeze()`), so later full collections never walk it; then `tune_collector()`.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_collector", "settle_heap"]

GC_THRESHOLDS = (100_000, 20, 20)
"""gen0 allocations, then gen0 runs per gen1 run, gen1 runs per gen2 run."""


def tune_collector() -> None:
    gc.set_threshold(*GC_THRESHOLDS)


def settle_heap() -> None:
    gc.collect()
    gc.freeze()
    tune_collector()
