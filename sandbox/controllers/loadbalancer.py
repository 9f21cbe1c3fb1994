"""External addresses for `LoadBalancer` Services, the way MetalLB or a cloud load balancer does it.

`Forwarders` holds one TCP forwarder per exposed port: it listens on an external address of the
sandbox's block (127.<net>.250-254.x) on the HOST network, and relays each connection to a
target picked when the connection arrives (a router, or a ready endpoint of the Service) on the
pod network. With the flat pod network the forwarder is plain loopback-to-loopback relaying; with
the isolated one it is the only way from the host into the namespace besides the API server.

`LoadBalancerController` gives every `type: LoadBalancer` Service that is not a Tandem router
Service (those are served by the router controller, which exposes its routers the same way) an
external address: `status.loadBalancer.ingress[0].ip`, each Service port forwarded to a ready
endpoint's target port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox.apiserver.objects import Api
from sandbox.controllers.base import IpPool, Reconciler
from sandbox.netns import PodNetwork

log = logging.getLogger("sandbox.loadbalancer")
Target = Callable[[], tuple[str, int] | None]
CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            if writer.can_write_eof():
                writer.write_eof()


@dataclass
class _Forwarder:
    server: asyncio.Server
    target: Target
    connections: set[asyncio.Task[None]] = field(default_factory=set)


class Forwarders:
    def __init__(self, network: PodNetwork) -> None:
        self.network = network
        self._by_key: dict[tuple[str, int], _Forwarder] = {}

    async def open(self, ip: str, port: int, target: Target) -> None:
        current = self._by_key.get((ip, port))
        if current is not None:
            current.target = target
            return
        sock = self.network.host_listener(ip, port)
        holder: dict[str, _Forwarder] = {}

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            fwd = holder["fwd"]
            if task is not None:
                fwd.connections.add(task)
            try:
                where = fwd.target()
                if where is None:
                    return
                try:
                    up_reader, up_writer = await asyncio.open_connection(where[0], where[1])
                except OSError as exc:
                    log.debug("load balancer %s:%s: %s:%s unreachable: %s", ip, port, *where, exc)
                    return
                try:
                    await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
                finally:
                    up_writer.close()
            finally:
                writer.close()
                if task is not None:
                    fwd.connections.discard(task)

        server = await asyncio.start_server(handle, sock=sock, backlog=1024)
        holder["fwd"] = self._by_key[(ip, port)] = _Forwarder(server, target)

    async def close(self, ip: str, port: int | None = None) -> None:
        for key in [k for k in self._by_key if k[0] == ip and (port is None or k[1] == port)]:
            fwd = self._by_key.pop(key)
            fwd.server.close()
            for task in list(fwd.connections):
                task.cancel()
            with contextlib.suppress(Exception):
                await fwd.server.wait_closed()

    def ports(self, ip: str) -> set[int]:
        return {port for (fip, port) in self._by_key if fip == ip}

    async def close_all(self) -> None:
        for ip in {k[0] for k in self._by_key}:
            await self.close(ip)


def ready_endpoint(endpoints: dict[str, Any] | None, port: dict[str, Any]) -> tuple[str, int] | None:
    """A ready (address, port) of a Service's Endpoints for one Service port (pure; random pick)."""
    candidates: list[tuple[str, int]] = []
    for subset in (endpoints or {}).get("subsets") or []:
        ports = subset.get("ports") or []
        chosen = next((p for p in ports if p.get("name") == port.get("name")), ports[0] if ports else None)
        if chosen is None:
            continue
        candidates += [(a["ip"], int(chosen["port"])) for a in subset.get("addresses") or [] if a.get("ip")]
    return random.choice(candidates) if candidates else None


class LoadBalancerController(Reconciler):
    name = "loadbalancer-controller"
    watches = (("", "services"), ("", "endpoints"))

    def __init__(self, api: Api, ips: IpPool, forwarders: Forwarders) -> None:
        super().__init__(api)
        self.ips = ips
        self.forwarders = forwarders
        self.external: dict[tuple[str, str], str] = {}

    async def reconcile(self) -> None:
        svc_rt = self.rt("", "services")
        wanted = {}
        for service in self.api.store.snapshot("", "services"):
            labels = service["metadata"].get("labels") or {}
            if (service.get("spec") or {}).get("type") != "LoadBalancer" or labels.get(
                "tandem.io/role"
            ) == "router":
                continue
            wanted[(service["metadata"]["namespace"], service["metadata"]["name"])] = service
        for key in [k for k in self.external if k not in wanted]:
            ip = self.external.pop(key)
            await self.forwarders.close(ip)
            self.ips.release(ip)
        for (namespace, name), service in wanted.items():
            known = self.external.get((namespace, name))
            ip = known if known is not None else self.ips.allocate("external")
            self.external[(namespace, name)] = ip
            ports = (service.get("spec") or {}).get("ports") or []
            for port in ports:
                await self.forwarders.open(ip, int(port["port"]), self._target(namespace, name, port))
            for stale in self.forwarders.ports(ip) - {int(p["port"]) for p in ports}:
                await self.forwarders.close(ip, stale)
            ingress = [{"ip": ip, "ipMode": "VIP"}]
            if ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") != ingress:
                status = {**(service.get("status") or {}), "loadBalancer": {"ingress": ingress}}
                self.api.write_status(svc_rt, service, status, self.name)

    def _target(self, namespace: str, name: str, port: dict[str, Any]) -> Target:
        def target() -> tuple[str, int] | None:
            return ready_endpoint(self.api.store.peek("", "endpoints", namespace, name), port)

        return target

    async def close(self) -> None:
        await self.forwarders.close_all()
