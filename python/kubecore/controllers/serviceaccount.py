"""The service account controller: a "default" ServiceAccount in every active namespace
(upstream pkg/controller/serviceaccount/serviceaccounts_controller.go).

Level-driven over two informers:
- a namespace added or updated enqueues that namespace;
- a ServiceAccount deleted enqueues its namespace (so a deleted "default" comes back).

A sync of a namespace reads it from the cache; gone, or not in phase Active (a terminating
namespace refuses new content anyway) -> nothing to do. Otherwise every wanted ServiceAccount
missing from the cache is created; AlreadyExists (the cache was behind) is success, and so is a
refusal because the namespace started terminating meanwhile (cause NamespaceTerminating). Any
other failure is retried with the queue's backoff.

The wanted accounts are upstream's default option: one named "default" with nothing else set
(`ServiceAccountsController(..., service_accounts=[...])` overrides it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from kubecore.client.errors import AlreadyExists
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import DeletedFinalStateUnknown, Indexer
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, QueueController, register
from kubecore.controllers.controller_utils import NAMESPACE_TERMINATING_CAUSE, has_status_cause, meta

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "serviceaccount"
DEFAULT_SERVICE_ACCOUNTS: tuple[Obj, ...] = ({"metadata": {"name": "default"}},)
"""Upstream's DefaultServiceAccountsControllerOptions: only "default"."""


def missing_accounts(wanted: Sequence[Obj], namespace: str, existing: Indexer) -> list[Obj]:
    """The wanted ServiceAccounts (as bodies to create in `namespace`) absent from the cache."""
    out = []
    for sa in wanted:
        name = str(meta(sa).get("name") or "")
        if f"{namespace}/{name}" in existing:
            continue
        body: Obj = {"apiVersion": "v1", "kind": "ServiceAccount", **sa}
        body["metadata"] = {**meta(sa), "namespace": namespace}
        out.append(body)
    return out


class ServiceAccountsController(QueueController):
    """Runs until cancelled: `await ServiceAccountsController(rest=..., informers=...).run(1)`; the queue
    holds namespace names."""

    name = NAME
    description = "service account controller"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 service_accounts: Sequence[Obj] = DEFAULT_SERVICE_ACCOUNTS) -> None:
        super().__init__(rest=rest, informers=informers)
        self.service_accounts = list(service_accounts)
        self.sa_client: ResourceClient
        self.ns_indexer: Indexer
        self.sa_indexer: Indexer

    async def wire(self) -> None:
        self.sa_client = await self.rest.resource("v1", "serviceaccounts")
        sa_informer = await self.informers.informer_for("v1", "serviceaccounts")
        ns_informer = await self.informers.informer_for("v1", "namespaces")
        self.sa_indexer, self.ns_indexer = sa_informer.indexer, ns_informer.indexer
        self.wiring.add(sa_informer, EventHandlerFuncs(on_delete_func=self._sa_deleted))
        self.wiring.add(ns_informer, EventHandlerFuncs(on_add_func=lambda ns, _initial: self._enqueue_namespace(ns),
                                                       on_update_func=lambda _old, cur: self._enqueue_namespace(cur)))

    def _enqueue_namespace(self, ns: Obj) -> None:
        self.queue.add(str(meta(ns).get("name") or ""))

    def _sa_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        sa = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        name = str(meta(sa).get("name") or "")
        if any(meta(w).get("name") == name for w in self.service_accounts):
            self.queue.add(str(meta(sa).get("namespace") or ""))

    async def sync(self, namespace: str) -> None:
        ns = self.ns_indexer.get_by_key(namespace)
        if ns is None:
            return
        if (ns.get("status") or {}).get("phase", "Active") != "Active":
            return  # a terminating namespace gets nothing new
        results = await asyncio.gather(*(self._create(body) for body in
                                         missing_accounts(self.service_accounts, namespace, self.sa_indexer)),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _create(self, body: Obj) -> None:
        try:
            await self.sa_client.create(body, namespace=str(body["metadata"]["namespace"]))
        except AlreadyExists:
            return
        except Exception as e:
            if has_status_cause(e, NAMESPACE_TERMINATING_CAUSE):
                return
            raise


@register(NAME, workers=1, aliases=("serviceaccount-controller",))
def new_serviceaccount_controller(ctx: ControllerContext) -> ServiceAccountsController:
    return ServiceAccountsController(rest=ctx.rest, informers=ctx.informers)
