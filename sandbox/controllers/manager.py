"""Starts and stops every controller of a sandbox cluster on the server's event loop."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from sandbox.apiserver.objects import Api
from sandbox.apiserver.storage import WatchEvent
from sandbox.controllers.base import EventRecorder, IpPool, Reconciler
from sandbox.controllers.kubelet import Kubelet
from sandbox.controllers.loadbalancer import Forwarders, LoadBalancerController
from sandbox.controllers.modelserving import ModelServingController
from sandbox.controllers.nodes import NamespaceController, create_nodes
from sandbox.controllers.routers import RouterController
from sandbox.controllers.scheduler import Scheduler
from sandbox.controllers.services import ServiceController
from sandbox.controllers.workloads import DeploymentController, ReplicaSetController
from sandbox.engine.farm import EngineFarm
from sandbox.netns import PodNetwork
from sandbox.router.farm import RouterFarm

if TYPE_CHECKING:
    from sandbox.controllers.runtime import SandboxOptions


class ControllerManager:
    def __init__(
        self, api: Api, options: SandboxOptions, net: int, network: PodNetwork | None = None
    ) -> None:
        self.api = api
        self.options = options
        self.net = net
        self.ips = IpPool(net)
        self.network = network or PodNetwork("flat")
        self.forwarders = Forwarders(self.network)
        self.events = EventRecorder(api)
        self.engines = EngineFarm()
        self.routers = RouterFarm()
        self.kubelet = Kubelet(api, self.events, self.ips, self.engines, options.max_grace_seconds)
        self.router_controller = RouterController(api, self.ips, self.routers, self.forwarders)
        self.loadbalancers = LoadBalancerController(api, self.ips, self.forwarders)
        self.reconcilers: list[Reconciler] = [
            NamespaceController(api),
            Scheduler(api, self.events),
            self.kubelet,
            DeploymentController(api, self.events),
            ReplicaSetController(api, self.events),
            ModelServingController(api),
            ServiceController(api, self.ips),
            self.router_controller,
            self.loadbalancers,
        ]
        self._tasks: list[asyncio.Task[None]] = []
        api.store.add_listener(self._on_event)

    def _on_event(self, event: WatchEvent) -> None:
        for reconciler in self.reconcilers:
            reconciler.notify(event)

    def pod_logs(self, namespace: str, name: str, container: str | None, previous: bool) -> list[str]:
        return self.kubelet.pod_logs(namespace, name, container, previous)

    async def start(self) -> None:
        o = self.options
        create_nodes(self.api, o.nodes, o.accelerators, o.node_labels, o.node_cpu, o.node_memory, self.net)
        for reconciler in self.reconcilers:
            self._tasks.append(asyncio.create_task(reconciler.run(), name=reconciler.name))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.kubelet.close()
        await self.router_controller.close()
        await self.loadbalancers.close()
        await self.engines.close()
