"""A deliberately tiny HTTP surface for leader election and event recording.

`leaderelection.LeaseClient` and `events.EventSink` are small async protocols (get/create/update a
Lease; create/patch an Event). `HttpClient` implements both over aiohttp so those modules work
today; when the full REST client in this package can do the same, an adapter over it replaces this
module without touching the election or recorder logic. Errors are the package's typed errors
(`kubecore.client.errors`, shared with the REST client): an error answer becomes the `ApiError`
subclass for its Status (404 `NotFound`, 409 `Conflict` / `AlreadyExists`, ...); a request that
got no answer raises `TransportError` (callers treat that as "retry later").
"""

from __future__ import annotations

import ssl as ssl_module
from types import TracebackType
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec

from kubecore.client.errors import TransportError, error_for, status_from_body

JSON = "application/json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


def _seg(s: str) -> str:
    return quote(s, safe="")


def _namespace(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


class HttpClient:
    """Leases and Events over plain HTTP(S) against one API server.

    `base_url` is the server (e.g. "http://127.0.0.1:6443"); `headers` may carry an
    Authorization bearer token; `timeout` bounds each request in seconds.
    Use as `async with HttpClient(url) as c:` or call `close()`.
    """

    def __init__(self, base_url: str, *, headers: dict[str, str] | None = None,
                 ssl: ssl_module.SSLContext | bool | None = None, timeout: float = 30.0) -> None:
        self._base = base_url.rstrip("/")
        self._headers = {"Accept": JSON, **(headers or {})}
        self._ssl: ssl_module.SSLContext | bool = True if ssl is None else ssl
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, path: str, *, body: Any = None,
                      content_type: str = JSON) -> dict[str, Any]:
        """One request; returns the decoded JSON object, raises `ApiError` or `TransportError`."""
        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self._headers, timeout=self._timeout)
        data = None if body is None else _encoder.encode(body)
        headers = None if data is None else {"Content-Type": content_type}
        try:
            async with self._session.request(method, self._base + path, data=data, headers=headers,
                                             ssl=self._ssl) as resp:
                raw = await resp.read()
                code = resp.status
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise TransportError(f"{method} {path}: {e!r}") from e
        if code >= 400:
            raise error_for(status_from_body(raw, code=code), code=code)
        try:
            decoded: Any = _decoder.decode(raw) if raw else None
        except msgspec.DecodeError:
            decoded = None
        if not isinstance(decoded, dict):
            raise error_for({"reason": "InternalError", "message": f"{method} {path}: the answer is not a JSON "
                             f"object: {raw[:200]!r}"}, code=500)
        return decoded

    # -- leaderelection.LeaseClient ------------------------------------------------------------

    @staticmethod
    def _leases(namespace: str) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{_seg(namespace)}/leases"

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.request("GET", f"{self._leases(namespace)}/{_seg(name)}")

    async def create_lease(self, lease: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", self._leases(_namespace(lease)), body=lease)

    async def update_lease(self, lease: dict[str, Any]) -> dict[str, Any]:
        path = f"{self._leases(_namespace(lease))}/{_seg(lease['metadata']['name'])}"
        return await self.request("PUT", path, body=lease)

    # -- events.EventSink ----------------------------------------------------------------------

    @staticmethod
    def _events(namespace: str) -> str:
        return f"/api/v1/namespaces/{_seg(namespace)}/events"

    async def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", self._events(_namespace(event)), body=event)

    async def patch_event(self, event: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        path = f"{self._events(_namespace(event))}/{_seg(event['metadata']['name'])}"
        return await self.request("PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)
