"""The client machinery against a real `kubecore apiserver` process: an informer follows writes made
by another client, resumes its watch after the server restarts on the same data directory, and
relists after a 410 when the history it needs was compacted while the server was down."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubecore.client import errors
from kubecore.client.config import ClientConfig
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.informer import EventHandlerFuncs, SharedIndexInformer
from kubecore.client.rest import RestClient
from tests.unit.client.fakeapi import eventually

REPO = Path(__file__).resolve().parents[2]
# The server's code: this checkout's python/ unless KUBECORE_SERVER_PYTHONPATH names another
# (for running these client tests against a known-good server while the server tree is mid-change).
SERVER_PYTHONPATH = os.environ.get("KUBECORE_SERVER_PYTHONPATH") or str(REPO / "python")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ApiServer:
    data_dir: Path
    port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (SERVER_PYTHONPATH, env.get("PYTHONPATH", "")) if p)
        return env

    def start(self) -> None:
        cmd = [sys.executable, "-m", "kubecore.cli.main", "apiserver", "--data-dir", str(self.data_dir),
               "--listen", f"127.0.0.1:{self.port}"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self._env())
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"apiserver exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"apiserver not healthy in 30 s:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def compact_to(self, rev: int) -> None:
        """Forget the store's history before `rev` (server stopped: the store is single-user)."""
        subprocess.run([sys.executable, "-m", "kubecore.cli.main", "store", "--data-dir", str(self.data_dir / "store")
                        if (self.data_dir / "store").exists() else str(self.data_dir), "compact", str(rev)],
                       check=True, env=self._env(), capture_output=True)


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[ApiServer]:
    srv = ApiServer(data_dir=tmp_path / "data", port=_free_port(), log=tmp_path / "server.log")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@asynccontextmanager
async def clients(srv: ApiServer) -> AsyncIterator[tuple[RestClient, RestClient]]:
    async with RestClient(ClientConfig(server=srv.url, qps=0, max_retries=20)) as a, \
            RestClient(ClientConfig(server=srv.url, qps=0)) as b:
        yield a, b


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def handler(self) -> EventHandlerFuncs:
        return EventHandlerFuncs(
            on_add_func=lambda o, _i: self.events.append(("add", o["metadata"]["name"])),
            on_update_func=lambda _o, n: self.events.append(("update", n["metadata"]["name"])),
            on_delete_func=lambda o: self.events.append(("delete", getattr(o, "key", None) or o["metadata"]["name"])))


async def test_informer_follows_another_clients_writes(apiserver: ApiServer) -> None:
    async with clients(apiserver) as (mine, theirs):
        factory = SharedInformerFactory(mine, namespace="default")
        informer = await factory.informer_for("v1", "configmaps",
                                              indexers={"color": lambda o: [(o.get("data") or {}).get("color", "")]})
        log = Log()
        informer.add_event_handler(log.handler())
        factory.start()
        assert (await factory.wait_for_cache_sync(20)) == {"configmaps.core": True}
        writer = await theirs.resource("v1", "configmaps")
        await writer.create(cm("one", color="red"), namespace="default")
        await writer.create(cm("two", color="blue"), namespace="default")
        await writer.patch("one", {"data": {"color": "blue"}}, namespace="default")
        await writer.delete("two", namespace="default")
        await eventually(lambda: ("delete", "two") in log.events, limit=20, what="delete seen")
        ours = [e for e in log.events if e[1] in ("one", "two")]
        assert ours == [("add", "one"), ("add", "two"), ("update", "one"), ("delete", "two")]
        assert informer.indexer.index_keys("color", "blue") == ["default/one"]
        assert informer.indexer.get_by_key("default/one")["data"] == {"color": "blue"}  # type: ignore[index]
        with pytest.raises(errors.NotFound):
            await writer.get("two", namespace="default")
        await factory.shutdown()


async def _informer(rest: RestClient) -> tuple[SharedIndexInformer, Log]:
    rc = await rest.resource("v1", "configmaps")
    informer = SharedIndexInformer(rc, namespace="default", name="cm-test")
    log = Log()
    informer.add_event_handler(log.handler())
    informer.start()
    assert await informer.wait_for_sync(20)
    return informer, log


async def test_watch_resumes_after_the_server_restarts_on_the_same_data_dir(apiserver: ApiServer) -> None:
    async with clients(apiserver) as (mine, theirs):
        writer = await theirs.resource("v1", "configmaps")
        await writer.create(cm("before"), namespace="default")
        informer, log = await _informer(mine)
        await eventually(lambda: ("add", "before") in log.events, limit=20, what="initial add")
        lists_before = informer.reflector.lists + informer.reflector.watch_lists
        await asyncio.to_thread(apiserver.stop)
        await asyncio.to_thread(apiserver.start)
        await writer.create(cm("after"), namespace="default")
        await writer.patch("before", {"data": {"x": "1"}}, namespace="default")
        await eventually(lambda: ("update", "before") in log.events, limit=60, what="events after restart")
        assert ("add", "after") in log.events
        assert informer.reflector.watches >= 2  # a new watch, after the connection broke
        assert informer.reflector.lists + informer.reflector.watch_lists == lists_before  # resumed, no relist
        await informer.stop()


async def test_relist_after_410_when_history_was_compacted(apiserver: ApiServer) -> None:
    async with clients(apiserver) as (mine, theirs):
        writer = await theirs.resource("v1", "configmaps")
        await writer.create(cm("keep"), namespace="default")
        await writer.create(cm("lost"), namespace="default")
        informer, log = await _informer(mine)
        await eventually(lambda: ("add", "lost") in log.events, limit=20, what="initial adds")
        synced_lists = informer.reflector.lists + informer.reflector.watch_lists
        # While the informer's server is down, the same data dir is served on another port (the
        # informer does not know it), changed there, and its history compacted past what the
        # informer has seen: resuming the watch gets 410, only a relist can catch up.
        port = apiserver.port
        await asyncio.to_thread(apiserver.stop)
        apiserver.port = _free_port()
        await asyncio.to_thread(apiserver.start)
        async with RestClient(ClientConfig(server=apiserver.url, qps=0)) as elsewhere:
            other = await elsewhere.resource("v1", "configmaps")
            await other.delete("lost", namespace="default")
            await other.create(cm("new"), namespace="default")
            latest = (await other.list(namespace="default"))["metadata"]["resourceVersion"]
        await asyncio.to_thread(apiserver.stop)
        await asyncio.to_thread(apiserver.compact_to, int(latest))
        apiserver.port = port
        await asyncio.to_thread(apiserver.start)
        await eventually(lambda: informer.reflector.lists + informer.reflector.watch_lists > synced_lists,
                         limit=60, what="relist after 410")
        await eventually(lambda: sorted(k for k in informer.indexer.list_keys()) ==
                         ["default/keep", "default/new"], limit=20, what="cache equals the server")
        # handlers are told after the cache is updated, each from its own queue: wait for them too
        await eventually(lambda: ("add", "new") in log.events and ("delete", "default/lost") in log.events,
                         limit=20, what="the relist's add and its DeletedFinalStateUnknown delete")
        await informer.stop()
