"""The async REST client: a keep-alive transport (aiohttp for watch streams), a token bucket,
retries, typed errors.

    async with RestClient(load_kubeconfig()) as client:
        pods = await client.resource("v1", "pods")          # discovery: plural, singular, kind or short name
        pod = await pods.get("web-0", namespace="default")
        async with pods.watch(namespace="default", resource_version=pod_list_rv) as events:
            async for ev in events: ...

`RestClient.request()` is the one way out for every verb. For each attempt it takes a token from the
client's `TokenBucket` (config `qps`/`burst`; qps <= 0 is unlimited), sends, and reads the body.
Retries (at most `config.max_retries`; client-go's default is 10) follow client-go's
`checkWait`/`IsNextRetry` rules, widened where it is safe:

- 429 TooManyRequests: always retried (the server refused before doing anything), after the
  `Retry-After` seconds if the answer has that header, else after the next `retry_backoff` step.
- 5xx with `Retry-After`: retried for every verb, after that many seconds (client-go does this).
- 5xx without it: retried only for idempotent verbs (GET, HEAD), after a backoff step.
- The connection could not be made (nothing was sent): retried for every verb.
- The connection broke after the request went out: retried only for idempotent verbs.

Everything else raises at once: a non-2xx answer as the `errors.ApiError` subclass of its Status,
a transport failure as `errors.TransportError`. Bodies are decoded with msgspec.

`stream()` opens a long-lived response (watch) with the same limiter, retry rules and errors for
the opening; reading it is `watch.WatchStream`'s job.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote, urlencode
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

import aiohttp
import msgspec

from kubecore.client import errors
from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.config import ClientConfig
from kubecore.client.flowcontrol import Backoff, TokenBucket
from kubecore.client.transport import ConnectError, HttpTransport

if TYPE_CHECKING:
    from kubecore.client.discovery import Discovery
    from kubecore.client.resource import ResourceClient

log = logging.getLogger(__name__)

IDEMPOTENT = frozenset({"GET", "HEAD"})
Params = Mapping[str, str | int | bool | None]
_encode = msgspec.json.encode
_decode = msgspec.json.decode


def default_retry_backoff() -> Backoff:
    """Delays between retries without a Retry-After: 250 ms doubling to 8 s, 10 % jitter."""
    return Backoff(duration=0.25, factor=2.0, jitter=0.1, cap=8.0)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The Retry-After header as seconds (integer form only, as client-go reads it)."""
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = int(value.strip())
    except ValueError:
        return None
    return float(seconds) if seconds >= 0 else None


def should_retry(*, status: int, method: str, retry_after: float | None) -> bool:
    """Whether an answer with this code may be retried (module docstring, first three rules)."""
    if status == 429:
        return True
    if status >= 500:
        return retry_after is not None or method in IDEMPOTENT
    return False


def encode_params(params: Params | None) -> dict[str, str]:
    """Query parameters as strings, dropping None; booleans as "true"/"false"."""
    out: dict[str, str] = {}
    for k, v in (params or {}).items():
        if v is None:
            continue
        out[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


class Response:
    """A finished answer: code, headers and the raw body (decode with `json()`)."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return _decode(self.body) if self.body else None


class _Retries:
    """The retry rules of the module docstring for one request: each failed attempt either
    sleeps before the next or raises the typed error."""

    __slots__ = ("client", "method", "target", "attempt", "backoff")

    def __init__(self, client: RestClient, method: str, target: str) -> None:
        self.client, self.method, self.target = client, method, target
        self.attempt = 0
        self.backoff: Backoff | None = None

    async def _sleep(self, wait: float | None, why: str) -> None:
        self.attempt += 1
        if wait is None:
            self.backoff = self.backoff or self.client._retry_backoff()
            wait = self.backoff.step()
        log.debug("%s %s: %s; retry %d in %.2fs", self.method, self.target, why, self.attempt, wait)
        await self.client.clock.sleep(wait)

    async def after_failure(self, e: BaseException, *, nothing_sent: bool) -> None:
        """A transport failure: retried when nothing was sent or the verb is idempotent."""
        if self.attempt < self.client.config.max_retries and (nothing_sent or self.method in IDEMPOTENT):
            await self._sleep(None, str(e))
            return
        url = self.client.config.server.rstrip("/") + self.target
        raise errors.TransportError(f"{self.method} {url}: {type(e).__name__}: {e}") from e

    async def after_answer(self, code: int, headers: Mapping[str, str], body: bytes) -> None:
        """A non-2xx answer: retried per `should_retry`, else raised as its ApiError."""
        wait = retry_after_seconds(headers)
        if self.attempt < self.client.config.max_retries and should_retry(status=code, method=self.method,
                                                                           retry_after=wait):
            await self._sleep(wait, f"HTTP {code}")
            return
        raise errors.error_for(errors.status_from_body(body, code=code), code=code, retry_after=wait)


class RestClient:
    """One API server, one connection pool; share it between everything in a process."""

    def __init__(self, config: ClientConfig, *, clock: Clock = REAL_CLOCK,
                 rate_limiter: TokenBucket | None = None,
                 retry_backoff: Callable[[], Backoff] = default_retry_backoff,
                 session: aiohttp.ClientSession | None = None) -> None:
        self.config = config
        self.clock = clock
        self.rate_limiter = rate_limiter or TokenBucket(config.qps, config.burst, clock=clock)
        self._retry_backoff = retry_backoff
        self._session = session
        self._owns_session = session is None
        self._discovery: Discovery | None = None
        self._transport: HttpTransport | None = None
        self._base = config.server.rstrip("/")
        self._headers = {"Accept": "application/json", "User-Agent": config.user_agent,
                         **config.extra_headers}

    # -- lifecycle -------------------------------------------------------------------------------
    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self.config.ssl_context(), limit=0)
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
            self._owns_session = True
        return self._session

    def _get_transport(self) -> HttpTransport:
        if self._transport is None:
            self._transport = HttpTransport(self.config.server, ssl=self.config.ssl_context())
        return self._transport

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        if self._session is not None and self._owns_session and not self._session.closed:
            await self._session.close()

    async def __aenter__(self) -> RestClient:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # -- discovery-driven resource clients -------------------------------------------------------
    @property
    def discovery(self) -> Discovery:
        from kubecore.client.discovery import Discovery

        if self._discovery is None:
            self._discovery = Discovery(self)
        return self._discovery

    async def resource(self, api_version: str | None, name: str) -> ResourceClient:
        """A client for one resource, found through discovery by plural, singular, kind or short
        name (`api_version` None: search every group's preferred version)."""
        from kubecore.client.resource import ResourceClient

        info = await self.discovery.resolve(api_version, name)
        return ResourceClient(self, info)

    # -- the one way out ---------------------------------------------------------------------------
    def _request_headers(self, content_type: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = {**self._headers, **self.config.auth_headers()}
        if content_type is not None:
            headers["Content-Type"] = content_type
        if extra:
            headers.update(extra)
        return headers

    async def request(self, method: str, path: str, *, params: Params | None = None,
                      body: bytes | None = None, content_type: str | None = None,
                      headers: Mapping[str, str] | None = None) -> Response:
        """Send with rate limiting and retries; return the 2xx answer or raise a typed error.

        Request/response calls go over the lean keep-alive transport (`client.transport`)."""
        query = encode_params(params)
        target = path + "?" + urlencode(query, quote_via=quote) if query else path
        all_headers = self._request_headers(content_type, headers)
        transport = self._get_transport()
        limiter = self.rate_limiter
        retry: _Retries | None = None  # made on the first failure (most requests have none)
        while True:
            if not limiter.unlimited:  # (an unlimited bucket's wait() returns at once)
                await limiter.wait()
            try:
                raw = await transport.request(method, target, headers=all_headers, body=body,
                                              timeout=self.config.timeout)
            except asyncio.CancelledError:
                raise
            except OSError as e:  # ConnectError, ConnectionLost, TimeoutError
                retry = retry or _Retries(self, method, target)
                await retry.after_failure(e, nothing_sent=isinstance(e, ConnectError))
                continue
            if 200 <= raw.status < 300:
                return Response(raw.status, raw.headers, raw.body)
            retry = retry or _Retries(self, method, target)
            await retry.after_answer(raw.status, raw.headers, raw.body)

    async def stream(self, method: str, path: str, *, params: Params | None = None,
                     headers: Mapping[str, str] | None = None) -> aiohttp.ClientResponse:
        """Open a streaming answer (watch) over aiohttp: the caller reads and releases it."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0)
        url = self._base + path
        query = encode_params(params)
        all_headers = self._request_headers(None, headers)
        retry = _Retries(self, method, path)
        while True:
            await self.rate_limiter.wait()
            try:
                raw = await self._get_session().request(method, url, params=query, headers=all_headers,
                                                        timeout=timeout)
                if 200 <= raw.status < 300:
                    return raw
                try:
                    data = await raw.read()
                finally:
                    raw.release()
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
                await retry.after_failure(e, nothing_sent=isinstance(e, aiohttp.ClientConnectorError))
                continue
            await retry.after_answer(raw.status, raw.headers, data)

    # -- JSON conveniences -------------------------------------------------------------------------
    async def get_json(self, path: str, *, params: Params | None = None,
                       headers: Mapping[str, str] | None = None) -> Any:
        return (await self.request("GET", path, params=params, headers=headers)).json()

    async def send_json(self, method: str, path: str, obj: Any, *, params: Params | None = None,
                        content_type: str = "application/json") -> Any:
        body = obj if isinstance(obj, bytes) else _encode(obj)
        return (await self.request(method, path, params=params, body=body, content_type=content_type)).json()

