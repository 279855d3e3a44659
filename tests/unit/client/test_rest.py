"""RestClient: typed errors, retries (429 / 5xx / Retry-After), the token bucket, patch types,
watch streams and discovery, against a tiny aiohttp server that misbehaves on purpose."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from kubecore.client import errors
from kubecore.client.clock import FakeClock
from kubecore.client.config import ClientConfig, ConfigError, load_kubeconfig
from kubecore.client.discovery import ResourceNotFound
from kubecore.client.flowcontrol import Backoff, TokenBucket
from kubecore.client.rest import RestClient
from kubecore.client.resource import ResourceClient
from tests.unit.client.fakeapi import FakeApi, InstantClock, serve, status

_enc = msgspec.json.encode


def client(url: str, clock: InstantClock, *, qps: float = 0, max_retries: int = 10) -> RestClient:
    return RestClient(ClientConfig(server=url, qps=qps, burst=1, max_retries=max_retries), clock=clock,
                      retry_backoff=lambda: Backoff(duration=0.25, factor=2.0, cap=8.0))


async def cms(rest: RestClient) -> ResourceClient:
    return await rest.resource("v1", "configmaps")


# -- typed errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("code", "reason", "cls"), [
    (404, "NotFound", errors.NotFound), (409, "AlreadyExists", errors.AlreadyExists),
    (409, "Conflict", errors.Conflict), (422, "Invalid", errors.Invalid), (410, "Expired", errors.Expired),
    (410, "Gone", errors.Gone), (403, "Forbidden", errors.Forbidden), (400, "BadRequest", errors.BadRequest),
])
async def test_status_errors_become_typed_exceptions_carrying_the_status(code: int, reason: str,
                                                                         cls: type[errors.ApiError]) -> None:
    api = FakeApi()
    body = status(code, reason, f"the {reason} message")
    body["details"] = {"name": "x", "causes": [{"field": "data.x", "reason": "FieldValueInvalid"}]}
    async with serve(api) as url, client(url, InstantClock()) as rest:
        pods = await cms(rest)
        api.responses.append((code, {}, _enc(body)))
        with pytest.raises(cls) as info:
            await pods.get("x", namespace="default")
    err = info.value
    assert type(err) is cls
    assert (err.code, err.reason, err.message) == (code, reason, f"the {reason} message")
    assert err.status["details"]["name"] == "x"
    if cls is errors.Invalid:
        assert isinstance(err, errors.Invalid) and err.causes[0]["field"] == "data.x"
    if code == 410:
        assert errors.is_expired(err)


async def test_a_non_status_error_body_becomes_the_message() -> None:
    api = FakeApi()
    api.responses.append((502, {}, b"bad gateway from a proxy"))
    async with serve(api) as url, client(url, InstantClock(), max_retries=0) as rest:
        with pytest.raises(errors.ApiError) as info:
            await rest.request("POST", "/api/v1/namespaces/default/configmaps", body=b"{}")
    assert info.value.code == 502 and "bad gateway from a proxy" in info.value.message
    assert isinstance(info.value, errors.InternalError)  # upstream's fallback reason for 5xx


# -- retries --------------------------------------------------------------------------------------------
async def test_429_with_retry_after_is_retried_after_that_many_seconds_even_for_post() -> None:
    api = FakeApi()
    busy = _enc(status(429, "TooManyRequests", "slow down"))
    api.responses += [(429, {"Retry-After": "3"}, busy), (429, {"Retry-After": "1"}, busy),
                      (201, {}, _enc({"kind": "ConfigMap", "metadata": {"name": "a"}}))]
    clock = InstantClock()
    async with serve(api) as url, client(url, clock) as rest:
        out = await rest.send_json("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
    assert out["metadata"]["name"] == "a"
    assert clock.slept == [3.0, 1.0]
    assert [m for m, _, _ in api.requests] == ["POST", "POST", "POST"]


async def test_5xx_without_retry_after_is_retried_with_backoff_only_for_idempotent_verbs() -> None:
    api = FakeApi()
    oops = _enc(status(503, "ServiceUnavailable", "later"))
    api.responses += [(503, {}, oops), (503, {}, oops), (200, {}, b'{"ok": true}')]
    clock = InstantClock()
    async with serve(api) as url, client(url, clock) as rest:
        assert await rest.get_json("/anything") == {"ok": True}
        assert clock.slept == [0.25, 0.5]  # Backoff steps, no Retry-After
        api.responses.append((503, {}, oops))
        with pytest.raises(errors.ServiceUnavailable):
            await rest.send_json("POST", "/api/v1/namespaces/default/configmaps", {})
    assert clock.slept == [0.25, 0.5]  # the POST was not retried
    assert len(api.requests) == 4


async def test_5xx_with_retry_after_is_retried_for_any_verb() -> None:
    api = FakeApi()
    api.responses += [(500, {"Retry-After": "2"}, b"{}"), (200, {}, b"{}")]
    clock = InstantClock()
    async with serve(api) as url, client(url, clock) as rest:
        await rest.send_json("DELETE", "/api/v1/namespaces/default/configmaps/a", {})
    assert clock.slept == [2.0]


async def test_retries_stop_at_max_retries_and_the_error_keeps_the_hint() -> None:
    api = FakeApi()
    api.responses += [(429, {"Retry-After": "1"}, _enc(status(429, "TooManyRequests", "no")))] * 5
    clock = InstantClock()
    async with serve(api) as url, client(url, clock, max_retries=3) as rest:
        with pytest.raises(errors.TooManyRequests) as info:
            await rest.get_json("/x")
    assert info.value.retry_after == 1.0
    assert len(api.requests) == 4 and clock.slept == [1.0, 1.0, 1.0]


async def test_connection_refused_is_retried_then_becomes_a_transport_error() -> None:
    clock = InstantClock()
    async with client("http://127.0.0.1:9", clock, max_retries=2) as rest:  # discard port: refused
        with pytest.raises(errors.TransportError):
            await rest.send_json("POST", "/api/v1/namespaces/default/configmaps", {})
    assert len(clock.slept) == 2  # nothing was sent, so even a POST is retried


# -- the token bucket ------------------------------------------------------------------------------------
async def test_token_bucket_allows_burst_then_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, 3, clock=clock)
    assert [bucket.reserve() for _ in range(5)] == pytest.approx([0, 0, 0, 0.1, 0.2])
    clock.advance(1.0)  # 10 tokens' worth of refill pays the debt of 2 and caps at burst
    assert [bucket.reserve() for _ in range(4)] == pytest.approx([0, 0, 0, 0.1])
    assert not bucket.try_accept()


async def test_zero_qps_is_unlimited_and_the_client_uses_its_configured_bucket() -> None:
    clock = InstantClock()
    api = FakeApi()
    async with serve(api) as url:
        async with client(url, clock, qps=0) as rest:
            await asyncio.gather(*(rest.get_json("/api") for _ in range(50)))
        assert clock.slept == []
        async with client(url, clock, qps=5) as rest:  # burst 1: every request after the first waits 0.2 s
            assert rest.rate_limiter.qps == 5 and rest.rate_limiter.burst == 1
            for _ in range(4):
                await rest.get_json("/api")
        assert clock.slept == pytest.approx([0.2, 0.2, 0.2])


# -- verbs -----------------------------------------------------------------------------------------------
async def test_patch_types_send_their_content_type_and_apply_its_parameters() -> None:
    api = FakeApi()
    async with serve(api) as url, client(url, InstantClock()) as rest:
        rc = await cms(rest)
        await rc.patch("a", [{"op": "add", "path": "/data/x", "value": "1"}], namespace="default", patch_type="json")
        await rc.patch("a", {"data": {"x": "1"}}, namespace="default")
        await rc.patch("a", {"data": {"x": "1"}}, namespace="default", patch_type="strategic")
        await rc.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
                       field_manager="me", force=True, namespace="default")
        with pytest.raises(ValueError):
            await rc.patch("a", {}, patch_type="apply")  # apply needs a field manager
    seen = [(ct, q) for (m, _, q), ct in zip(api.requests, api.content_types) if m == "PATCH"]
    assert [ct for ct, _ in seen] == ["application/json-patch+json", "application/merge-patch+json",
                                      "application/strategic-merge-patch+json", "application/apply-patch+yaml"]
    assert seen[3][1] == {"fieldManager": "me", "force": "true"}


# -- watch streams --------------------------------------------------------------------------------------
async def test_watch_stream_parses_events_split_across_chunks_and_ends_cleanly() -> None:
    api = FakeApi()
    await api.put("a")
    api.watch_plan = ["drop-after:2"]
    async with serve(api) as url, client(url, InstantClock()) as rest:
        rc = await cms(rest)
        stream = await rc.watch(namespace="default", resource_version="100")
        got = []
        async with stream:
            async for ev in stream:
                got.append((ev.type, ev.object["metadata"]["name"], ev.resource_version()))
                if len(got) == 1:
                    await api.put("b", {"k": "v"})
                    await api.put("c")  # the third event is cut in half: the stream breaks
        assert got == [("ADDED", "a", "101"), ("ADDED", "b", "102")]
        assert stream.broken and stream.closed


async def test_watch_error_event_becomes_gone_and_close_from_another_task_ends_iteration() -> None:
    api = FakeApi()
    api.watch_plan = ["gone"]
    async with serve(api) as url, client(url, InstantClock()) as rest:
        rc = await cms(rest)
        async with await rc.watch(resource_version="5") as stream:
            events = [ev async for ev in stream]
        assert [e.type for e in events] == ["ERROR"]
        assert isinstance(events[0].error(), errors.Gone)

        idle = await rc.watch(resource_version=str(api.rv))  # nothing happens on it
        reader = asyncio.ensure_future(_drain(idle))
        await asyncio.sleep(0.05)
        idle.close()
        assert await asyncio.wait_for(reader, 5) == 0
        assert not idle.broken  # closed by us, not broken


async def _drain(stream) -> int:  # type: ignore[no-untyped-def]
    return len([ev async for ev in stream])


# -- discovery and config --------------------------------------------------------------------------------
async def test_discovery_resolves_plural_singular_kind_and_short_names() -> None:
    api = FakeApi()
    async with serve(api) as url, client(url, InstantClock()) as rest:
        infos = {(await rest.resource(None, n)).info for n in ("configmaps", "configmap", "ConfigMap", "cm")}
        node = (await rest.resource("v1", "nodes")).info
        with pytest.raises(ResourceNotFound):
            await rest.resource(None, "widgets")
    assert len(infos) == 1
    info = infos.pop()
    assert (info.resource, info.kind, info.namespaced) == ("configmaps", "ConfigMap", True)
    assert info.path(namespace="ns", name="a", subresource="status") == "/api/v1/namespaces/ns/configmaps/a/status"
    assert node.subresources == {"status"} and not node.namespaced
    assert node.path(namespace="ignored", name="n1") == "/api/v1/nodes/n1"


def test_kubeconfig_current_context_paths_and_credentials(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("x")
    cfg_file = tmp_path / "config"
    cfg_file.write_text("""
apiVersion: v1
kind: Config
current-context: two
clusters:
- name: c1
  cluster: {server: "https://one.example:6443/", certificate-authority: ca.crt}
- name: c2
  cluster: {server: "http://two.example:8080", insecure-skip-tls-verify: true}
users:
- name: u1
  user: {token: abc}
- name: u2
  user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}
contexts:
- name: one
  context: {cluster: c1, user: u1, namespace: team}
- name: two
  context: {cluster: c2, user: u2}
""")
    two = load_kubeconfig(cfg_file)
    assert (two.server, two.insecure_skip_tls_verify, two.namespace) == ("http://two.example:8080", True, "default")
    assert (two.cert_data, two.key_data) == (b"cert", b"key")
    one = load_kubeconfig(cfg_file, context="one")
    assert one.server == "https://one.example:6443" and one.ca_file == str(tmp_path / "ca.crt")
    assert one.auth_headers() == {"Authorization": "Bearer abc"} and one.namespace == "team"
    with pytest.raises(ConfigError):
        load_kubeconfig(cfg_file, context="three")
