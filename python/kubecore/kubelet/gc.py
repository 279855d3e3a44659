"""Garbage collection of dead containers, sandboxes and unused images (upstream
pkg/kubelet/kuberuntime/kuberuntime_gc.go and pkg/kubelet/images/image_gc_manager.go).

`ContainerGC.collect()` (every `CONTAINER_GC_PERIOD` = 1 min), with upstream's default policy
(minAge 0, maxPerPodContainer 1, maxContainers -1):
1. Evictable containers are those not running and created more than `min_age` ago, grouped into
   units by (pod uid, container name), newest first.
2. Once the API's pods are synced (`sources_ready`), every unit of a pod whose content may be
   removed (`content_removable(uid)`: the pod is unknown, evicted, or deleted and terminated) is
   removed entirely; `collect(all_unused=True)` (under disk pressure) also every unit of a pod
   that is terminated (`runtime_removable(uid)`).
3. Each remaining unit keeps its newest `max_per_pod_container` instances; the older ones go.
4. With `max_containers` >= 0 and more dead containers than that, each unit is cut to
   max(1, max_containers // units), then the oldest overall go until the total fits.
5. Sandboxes: a sandbox that is ready or still has containers is active and never removed. Of a
   pod whose content may be removed, every inactive sandbox goes; otherwise all but the newest.

`ImageGC` (every `IMAGE_GC_PERIOD` = 5 min), with upstream's defaults (high 85%, low 80%,
minimum age 2 min):
- `detect()` lists images and all containers (running or not): an image a container refers to
  (by id, tag or digest) is in use and its last-used time is now; each image's first-detected
  time is remembered.
- `collect()`: usage of the image file system = 100 - available * 100 / capacity. At or above
  the high threshold, free capacity * (100 - low) / 100 - available bytes: unused images, least
  recently used first (then first detected), skipping the sandbox image, pinned images and
  images detected less than `min_age` ago, until enough is freed. Freeing less than asked
  returns `ImageGCResult.shortfall` with upstream's message ("Failed to garbage collect required
  amount of images. Attempted to free N bytes, but only found M bytes eligible to free.").
- `delete_unused()` removes every unused image old enough (the eviction manager's reclaim under
  disk pressure).

Both take an injected clock, so tests drive the ages without waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kubecore.client.clock import Clock
from kubecore.kubelet import cri, podutil

log = logging.getLogger(__name__)

CONTAINER_GC_PERIOD = 60.0
IMAGE_GC_PERIOD = 300.0


@dataclass(frozen=True)
class ContainerGCPolicy:
    min_age: float = 0.0
    max_per_pod_container: int = 1
    max_containers: int = -1


@dataclass
class ContainerGCResult:
    containers: list[str] = field(default_factory=list)
    sandboxes: list[str] = field(default_factory=list)


def _uid(c: cri.Container, sandboxes: dict[str, cri.PodSandbox]) -> str:
    uid = c.labels.get(cri.POD_UID_LABEL)
    if uid:
        return uid
    s = sandboxes.get(c.pod_sandbox_id)
    return s.metadata.uid if s is not None else ""


class ContainerGC:
    """Dead containers and sandboxes (see the module docstring)."""

    def __init__(self, runtime: cri.Runtime, *, clock: Clock, content_removable: Callable[[str], bool],
                 sources_ready: Callable[[], bool], runtime_removable: Callable[[str], bool] | None = None,
                 policy: ContainerGCPolicy = ContainerGCPolicy()) -> None:
        self.runtime = runtime
        self.clock = clock
        self.content_removable = content_removable
        self.runtime_removable = runtime_removable or content_removable
        self.sources_ready = sources_ready
        self.policy = policy

    async def _units(self) -> dict[tuple[str, str], list[cri.Container]]:
        sandboxes = {s.id: s for s in await self.runtime.list_pod_sandbox()}
        newest_allowed = cri.ns_from_epoch(self.clock.now() - self.policy.min_age)
        units: dict[tuple[str, str], list[cri.Container]] = {}
        for c in await self.runtime.list_containers():
            if c.state == cri.ContainerState.CONTAINER_RUNNING or c.created_at > newest_allowed:
                continue
            units.setdefault((_uid(c, sandboxes), c.metadata.name), []).append(c)
        for unit in units.values():
            unit.sort(key=lambda c: c.created_at, reverse=True)
        return units

    async def _remove_oldest(self, unit: list[cri.Container], n: int, result: ContainerGCResult) -> None:
        """Remove the `n` oldest of `unit` (sorted newest first), in place."""
        for c in unit[len(unit) - n:] if n > 0 else []:
            try:
                await self.runtime.remove_container(c.id)
                result.containers.append(c.id)
            except cri.CriError as e:
                log.warning("container GC: removing %s failed: %s", c.id, e)
        del unit[len(unit) - max(0, n):]

    def _removable(self, uid: str, all_unused: bool) -> bool:
        return self.content_removable(uid) or (all_unused and self.runtime_removable(uid))

    async def collect(self, *, all_unused: bool = False) -> ContainerGCResult:
        """One pass; `all_unused` (DeleteAllUnusedContainers, the eviction manager's reclaim) also
        clears pods that are terminated but not yet deleted (`runtime_removable`)."""
        result = ContainerGCResult()
        units = await self._units()
        ready = self.sources_ready()
        if ready:
            for key in [k for k in units if self._removable(k[0], all_unused)]:
                await self._remove_oldest(units[key], len(units[key]), result)
                del units[key]
        if self.policy.max_per_pod_container >= 0:
            await self._enforce_per_unit(units, self.policy.max_per_pod_container, result)
        await self._enforce_total(units, result)
        await self._sandboxes(ready, all_unused, result)
        return result

    async def _enforce_per_unit(self, units: dict[tuple[str, str], list[cri.Container]], keep: int,
                                result: ContainerGCResult) -> None:
        for unit in units.values():
            await self._remove_oldest(unit, len(unit) - keep, result)

    async def _enforce_total(self, units: dict[tuple[str, str], list[cri.Container]],
                             result: ContainerGCResult) -> None:
        limit = self.policy.max_containers
        total = sum(len(u) for u in units.values())
        if limit < 0 or total <= limit:
            return
        await self._enforce_per_unit(units, max(1, limit // max(1, len(units))), result)
        remaining = sorted((c for u in units.values() for c in u), key=lambda c: c.created_at, reverse=True)
        if len(remaining) > limit:
            await self._remove_oldest(remaining, len(remaining) - limit, result)

    async def _sandboxes(self, ready: bool, all_unused: bool, result: ContainerGCResult) -> None:
        with_containers = {c.pod_sandbox_id for c in await self.runtime.list_containers()}
        by_pod: dict[str, list[cri.PodSandbox]] = {}
        for s in await self.runtime.list_pod_sandbox():
            by_pod.setdefault(s.metadata.uid, []).append(s)
        for uid, group in by_pod.items():
            group.sort(key=lambda s: s.created_at, reverse=True)
            keep = 0 if ready and self._removable(uid, all_unused) else 1
            for s in group[keep:]:
                if s.state == cri.PodSandboxState.SANDBOX_READY or s.id in with_containers:
                    continue
                try:
                    await self.runtime.remove_pod_sandbox(s.id)
                    result.sandboxes.append(s.id)
                except cri.CriError as e:
                    log.warning("container GC: removing sandbox %s failed: %s", s.id, e)


@dataclass(frozen=True)
class ImageGCPolicy:
    high_threshold_percent: int = 85
    low_threshold_percent: int = 80
    min_age: float = 120.0

    def __post_init__(self) -> None:
        if not 0 <= self.low_threshold_percent <= self.high_threshold_percent <= 100:
            raise ValueError(f"image GC thresholds must satisfy 0 <= low ({self.low_threshold_percent}) <= "
                             f"high ({self.high_threshold_percent}) <= 100")


@dataclass
class _ImageRecord:
    first_detected: float
    last_used: float
    size: int
    pinned: bool


@dataclass
class ImageGCResult:
    removed: list[str] = field(default_factory=list)
    freed: int = 0
    wanted: int = 0
    shortfall: str = ""
    """Upstream's failure message when less than `wanted` could be freed, else empty."""


ImageFsUsage = Callable[[], Awaitable[tuple[int, int]]]
"""async () -> (capacity bytes, available bytes) of the image file system."""


class ImageGC:
    """Unused images (see the module docstring)."""

    def __init__(self, runtime: cri.Runtime, *, clock: Clock, fs_usage: ImageFsUsage, sandbox_image: str = "",
                 policy: ImageGCPolicy = ImageGCPolicy()) -> None:
        self.runtime = runtime
        self.clock = clock
        self.fs_usage = fs_usage
        self.sandbox_image = podutil.normalize_image(sandbox_image) if sandbox_image else ""
        self.policy = policy
        self.records: dict[str, _ImageRecord] = {}
        """image id -> when it was first seen and last used (only images present at the last detect)."""
        self._images: dict[str, cri.Image] = {}

    async def detect(self) -> set[str]:
        """Refresh the records; returns the ids of images in use."""
        now = self.clock.now()
        images = await self.runtime.list_images()
        refs: set[str] = set()
        for c in await self.runtime.list_containers():
            refs.update(r for r in (c.image_ref, c.image_id, c.image.image) if r)
            if c.image.image:
                refs.add(podutil.normalize_image(c.image.image))
        in_use: set[str] = set()
        self._images = {i.id: i for i in images}
        for image in images:
            names = {image.id, *image.repo_tags, *image.repo_digests}
            rec = self.records.get(image.id)
            if rec is None:
                rec = self.records[image.id] = _ImageRecord(now, 0.0, image.size, image.pinned)
            rec.size, rec.pinned = image.size, image.pinned
            if names & refs:
                in_use.add(image.id)
                rec.last_used = now
        for gone in set(self.records) - set(self._images):
            del self.records[gone]
        return in_use

    def _protected(self, image: cri.Image) -> bool:
        if image.pinned:
            return True
        return bool(self.sandbox_image) and self.sandbox_image in {podutil.normalize_image(t) for t in image.repo_tags}

    async def free_space(self, wanted: int) -> ImageGCResult:
        """Remove unused images, least recently used first, until `wanted` bytes are freed."""
        in_use = await self.detect()
        now = self.clock.now()
        result = ImageGCResult(wanted=wanted)
        candidates = [(rec.last_used, rec.first_detected, iid) for iid, rec in self.records.items()
                      if iid not in in_use and not self._protected(self._images[iid])]
        for _, first_detected, iid in sorted(candidates):
            if result.freed >= wanted:
                break
            if now - first_detected < self.policy.min_age:
                continue
            try:
                await self.runtime.remove_image(cri.ImageSpec(image=iid))
            except cri.CriError as e:
                log.warning("image GC: removing %s failed: %s", iid, e)
                continue
            result.removed.append(iid)
            result.freed += self.records.pop(iid).size
        if result.freed < wanted:
            result.shortfall = (f"Failed to garbage collect required amount of images. Attempted to free {wanted} "
                                f"bytes, but only found {result.freed} bytes eligible to free.")
        return result

    async def collect(self) -> ImageGCResult:
        """GarbageCollect: free space when the image fs is at or above the high threshold."""
        capacity, available = await self.fs_usage()
        if capacity <= 0:
            await self.detect()
            return ImageGCResult()
        usage = 100 - available * 100 // capacity
        if usage < self.policy.high_threshold_percent:
            await self.detect()
            return ImageGCResult()
        wanted = capacity * (100 - self.policy.low_threshold_percent) // 100 - available
        log.info("image GC: disk usage %d%% is at or over the high threshold (%d%%), trying to free %d bytes "
                 "down to the low threshold (%d%%)", usage, self.policy.high_threshold_percent, wanted,
                 self.policy.low_threshold_percent)
        return await self.free_space(wanted)

    async def delete_unused(self) -> ImageGCResult:
        """DeleteUnusedImages: every unused image old enough."""
        result = await self.free_space(1 << 62)
        result.wanted, result.shortfall = result.freed, ""
        return result
