"""Resource usage of nodes and containers, scraped from the kubelets' `/metrics/resource` on
demand, as metrics-server scrapes them (pkg/scraper, pkg/storage), for `metricsapi.py`.

    scraper = Scraper(fetch=http_fetch(session), clock=clock)
    usage = await scraper.node_usage("n1", ("10.0.0.5", 10250))   # NodeUsage, or None

CPU is a rate: (cumulative core-seconds now - before) / (time now - before), over the window
between two scrapes of the same node, with the samples' own timestamps (milliseconds, from the
kubelet). So the scraper keeps, per node, the last two scrapes:
- a request finds the last scrape younger than `ttl`: the usage of the last two is answered
  again (no kubelet is called);
- older: the node is scraped again, and the last scrape becomes the previous one;
- the node has no previous scrape younger than `max_window` (first request, or after a long
  quiet time): it is scraped twice, `first_gap` seconds apart, so the first answer is a real
  rate over a short window and never an average over hours.

A container is reported only when both scrapes have it and its counter did not go backwards (a
restart); a pod only when all its reported containers are (metrics-server's rule), so a pod
just started is missing for one scrape. Memory is the last scrape's working set. A kubelet that
cannot be reached or answers garbage counts as "no metrics" for its node (logged, not raised),
and its cached scrapes are dropped. Concurrent requests for one node share one scrape.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from kubecore.client.clock import Clock

log = logging.getLogger(__name__)
Endpoint = tuple[str, int]
Fetch = Callable[[str, Endpoint], Awaitable[str]]
ContainerKey = tuple[str, str, str]  # namespace, pod, container
NANOS_PER_S = 1_000_000_000
DEFAULT_TTL = 5.0
DEFAULT_FIRST_GAP = 1.0
DEFAULT_MAX_WINDOW = 90.0
SCRAPE_TIMEOUT = 10.0
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class ScrapeError(Exception):
    """A kubelet's answer that could not be read as resource metrics."""


@dataclass(frozen=True)
class Sample:
    """One cumulative point: `time` (epoch seconds), core-seconds so far, working set bytes."""

    time: float
    cpu_seconds: float
    memory: int


@dataclass
class Scrape:
    """A node's `/metrics/resource` at one moment (`at` is the scraper's clock)."""

    at: float
    node: Sample | None = None
    containers: dict[ContainerKey, Sample] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """A rate over a window: what a NodeMetrics or ContainerMetrics says."""

    timestamp: float
    window: float
    nano_cores: int
    memory: int


@dataclass(frozen=True)
class NodeUsage:
    node: Usage | None
    containers: dict[tuple[str, str], dict[str, Usage]]
    """(namespace, pod) -> container name -> usage; only pods whose every container has one."""


def _unescape(value: str) -> str:
    return re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], value)


def _labels(text: str) -> dict[str, str]:
    return {m.group(1): _unescape(m.group(2)) for m in _LABEL.finditer(text or "")}


def parse(text: str, *, at: float) -> Scrape:
    """The Prometheus text of /metrics/resource -> a Scrape; samples without a timestamp get `at`."""
    cpu: dict[ContainerKey | None, tuple[float, float]] = {}
    mem: dict[ContainerKey | None, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            raise ScrapeError(f"not a metric line: {line[:100]!r}")
        name, labels, value, stamp = m.groups()
        if name not in ("node_cpu_usage_seconds_total", "node_memory_working_set_bytes",
                        "container_cpu_usage_seconds_total", "container_memory_working_set_bytes"):
            continue
        key: ContainerKey | None = None
        if name.startswith("container_"):
            ls = _labels(labels)
            key = (ls.get("namespace", ""), ls.get("pod", ""), ls.get("container", ""))
        try:
            v = float(value)
        except ValueError:
            raise ScrapeError(f"not a number: {value!r} in {name}") from None
        if name.endswith("_cpu_usage_seconds_total"):
            cpu[key] = (int(stamp) / 1000 if stamp else at, v)
        else:
            mem[key] = v
    out = Scrape(at=at)
    for key, (t, seconds) in cpu.items():
        if key not in mem:
            continue  # metrics-server needs both figures
        sample = Sample(time=t, cpu_seconds=seconds, memory=int(mem[key]))
        if key is None:
            out.node = sample
        else:
            out.containers[key] = sample
    return out


def usage(prev: Sample, last: Sample) -> Usage | None:
    """The rate between two points, or None (no time between them, or the counter was reset)."""
    window = last.time - prev.time
    if window <= 0 or last.cpu_seconds < prev.cpu_seconds:
        return None
    cores = (last.cpu_seconds - prev.cpu_seconds) / window
    return Usage(timestamp=last.time, window=round(window, 3), nano_cores=int(cores * NANOS_PER_S),
                 memory=last.memory)


def node_usage(prev: Scrape, last: Scrape) -> NodeUsage:
    """What two scrapes of a node say (see the module docstring for the pod rule)."""
    node = usage(prev.node, last.node) if prev.node is not None and last.node is not None else None
    pods: dict[tuple[str, str], dict[str, Usage] | None] = {}
    for (ns, pod, container), sample in sorted(last.containers.items()):
        before = prev.containers.get((ns, pod, container))
        u = usage(before, sample) if before is not None else None
        have = pods.setdefault((ns, pod), {})
        if u is None or have is None:
            pods[(ns, pod)] = None
        else:
            have[container] = u
    return NodeUsage(node=node, containers={k: v for k, v in pods.items() if v})


def http_fetch(session: aiohttp.ClientSession, *, timeout: float = SCRAPE_TIMEOUT) -> Fetch:
    """GET http://<address>:<port>/metrics/resource?node=<name> (see kubelet/server.py)."""

    async def fetch(node: str, endpoint: Endpoint) -> str:
        host, port = endpoint
        host = f"[{host}]" if ":" in host else host
        url = f"http://{host}:{port}/metrics/resource"
        async with session.get(url, params={"node": node},
                               timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            text = await resp.text()
            if resp.status != 200:
                raise ScrapeError(f"GET {url}: {resp.status} {text.strip()[:200]}")
            return text

    return fetch


class Scraper:
    """The per-node cache of the last two scrapes (see the module docstring)."""

    def __init__(self, fetch: Fetch, *, clock: Clock, ttl: float = DEFAULT_TTL,
                 first_gap: float = DEFAULT_FIRST_GAP, max_window: float = DEFAULT_MAX_WINDOW) -> None:
        self.fetch = fetch
        self.clock = clock
        self.ttl = ttl
        self.first_gap = first_gap
        self.max_window = max_window
        self._scrapes: dict[str, tuple[Scrape | None, Scrape]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def forget(self, node: str) -> None:
        self._scrapes.pop(node, None)
        self._locks.pop(node, None)

    async def _scrape(self, node: str, endpoint: Endpoint) -> Scrape:
        at = self.clock.now()
        return parse(await self.fetch(node, endpoint), at=at)

    async def node_usage(self, node: str, endpoint: Endpoint) -> NodeUsage | None:
        """The node's usage and its pods', or None when its kubelet gave nothing usable."""
        lock = self._locks.setdefault(node, asyncio.Lock())
        async with lock:
            try:
                prev, last = await self._refresh(node, endpoint)
            except (ScrapeError, aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
                log.warning("metrics: scraping node %s at %s:%d failed: %s", node, *endpoint, e)
                self._scrapes.pop(node, None)
                return None
        return node_usage(prev, last)

    async def _refresh(self, node: str, endpoint: Endpoint) -> tuple[Scrape, Scrape]:
        now = self.clock.now()
        prev, last = self._scrapes.get(node, (None, None))
        if last is not None and prev is not None and now - last.at < self.ttl:
            return prev, last
        if last is None or now - last.at > self.max_window:
            last = await self._scrape(node, endpoint)
            await self.clock.sleep(self.first_gap)
        newest = await self._scrape(node, endpoint)
        self._scrapes[node] = (last, newest)
        return last, newest
