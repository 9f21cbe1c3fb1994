"""All simulated engines of one sandbox process, on its running asyncio loop.

The kubelet calls `start(pod_key, ip, spec, labels)` for each scheduled pod: the engine listens on
`ip:spec.port` (port 0 picks a free port; `address(pod_key)` tells which), and `stop(pod_key, grace)`
when the pod goes: the socket closes at once, in-flight requests get up to `grace_seconds` to finish,
then the rest are aborted. `start` raises `EngineArgumentError` when the engine refuses its
configuration (the message is also the pod's last log line) and `OSError` when the address is taken.
Engines with the same Mooncake master share one Mooncake Store (a cross-instance KV pool).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from aiohttp import web

from perfmodel.model.prefix_cache import PrefixCache
from sandbox.engine.app import build_app
from sandbox.engine.config import perf_config
from sandbox.engine.engine import SimEngine
from sandbox.engine.planes import ALL, METRICS, TENT, socket_planes
from sandbox.engine.real import RealEngines, wants_real
from sandbox.engine.spec import EngineArgumentError, EngineSpec

STORE_BLOCKS = 262_144
KEPT_LOGS = 2000


class EngineFarm:
    def __init__(self, process_env: Mapping[str, str] | None = None) -> None:
        self._env = dict(os.environ if process_env is None else process_env)
        self._engines: dict[str, SimEngine] = {}
        self._sites: dict[str, web.TCPSite] = {}
        self._by_socket: dict[tuple[str, int], SimEngine] = {}
        # MindIE's management / metrics planes on ports of their own: the extra sites, what each serves
        self._plane_sites: dict[str, list[web.TCPSite]] = {}
        self._planes: dict[tuple[str, int], frozenset[str]] = {}
        self._by_address: dict[str, SimEngine] = {}
        self._stores: dict[str, PrefixCache] = {}
        self._old_logs: OrderedDict[str, list[str]] = OrderedDict()
        self._runner: web.AppRunner | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._real = RealEngines()  # pods served by a real engine process (SANDBOX_REAL_ENGINES)
        # Called with (pod_key, new_role) when an engine switches role in place (POST /kv/switch_role),
        # e.g. for the kubelet to relabel the pod.
        self.on_role_change: Callable[[str, str], None] | None = None

    # --- lifecycle ----------------------------------------------------------------------------
    async def _ensure_runner(self) -> web.AppRunner:
        if self._runner is None:
            runner = web.AppRunner(
                build_app(self._resolve, self._on_crash, self._planes_of),
                access_log=None,
                handle_signals=False,
                shutdown_timeout=0.5,
            )
            await runner.setup()
            self._runner = runner
        return self._runner

    async def start(self, pod_key: str, ip: str, spec: EngineSpec, labels: dict[str, str]) -> None:
        if pod_key in self._engines or pod_key in self._real.pods:
            await self.stop(pod_key, 0)
        if wants_real(spec, self._env):
            await self._real.start(pod_key, ip, spec)
            return
        try:
            cfg = perf_config(spec, self._env)
        except EngineArgumentError as exc:
            self._keep_logs(pod_key, [str(exc)])
            raise
        runner = await self._ensure_runner()
        store = None
        if spec.mooncake_master:
            store = self._stores.setdefault(spec.mooncake_master, PrefixCache(STORE_BLOCKS))
        engine = SimEngine(pod_key, ip, spec.port, spec, dict(labels), cfg, self.lookup, store)
        engine.on_role_change = self._role_changed
        site = web.TCPSite(runner, ip, spec.port, reuse_address=True, backlog=1024)
        try:
            await site.start()
        except OSError as exc:
            line = (
                f"ERROR: [Errno {exc.errno}] error while attempting to bind on address ('{ip}', {spec.port})"
            )
            self._keep_logs(pod_key, [*engine.log_lines, line])
            raise
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            engine.port = int(server.sockets[0].getsockname()[1])
        engine.started = time.monotonic()
        engine.log_startup()
        self._engines[pod_key] = engine
        self._sites[pod_key] = site
        self._by_socket[(ip, engine.port)] = engine
        self._by_address[engine.address] = engine
        await self._open_planes(engine, runner)

    async def _open_planes(self, engine: SimEngine, runner: web.AppRunner) -> None:
        """MindIE's management and metrics planes on their own ports, when its config gives them."""
        spec = engine.spec
        if spec.management_port is None and spec.metrics_port is None and engine.tent_port is None:
            return
        by_port = socket_planes(spec.port, spec.management_port, spec.metrics_port)
        self._planes[(engine.ip, engine.port)] = by_port.pop(spec.port)
        if engine.tent_port is not None:  # TENT's /metrics only, on its own port
            by_port[engine.tent_port] = frozenset({METRICS, TENT})
        engine.plane_ports = {}
        for port, planes in by_port.items():
            site = web.TCPSite(runner, engine.ip, port, reuse_address=True)
            await site.start()
            server = getattr(site, "_server", None)
            bound = int(server.sockets[0].getsockname()[1]) if server and server.sockets else port
            self._plane_sites.setdefault(engine.pod_key, []).append(site)
            self._by_socket[(engine.ip, bound)] = engine
            self._planes[(engine.ip, bound)] = planes
            engine.plane_ports.update(dict.fromkeys(planes, bound))

    async def _close_planes(self, engine: SimEngine) -> None:
        for site in self._plane_sites.pop(engine.pod_key, []):
            await site.stop()
        for key in [k for k, v in self._by_socket.items() if v is engine]:
            self._planes.pop(key, None)
            if key != (engine.ip, engine.port):
                del self._by_socket[key]

    async def stop(self, pod_key: str, grace_seconds: float) -> None:
        if pod_key in self._real.pods:
            self._keep_logs(pod_key, await self._real.stop(pod_key))
            return
        engine = self._engines.get(pod_key)
        if engine is None:
            return
        engine.draining = True
        engine.log("Shutting down: no new requests; draining in-flight requests", source="launcher.py")
        site = self._sites.pop(pod_key, None)
        if site is not None:
            await site.stop()
        await self._close_planes(engine)
        deadline = time.monotonic() + max(0.0, grace_seconds)
        while engine.inflight > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if engine.inflight:
            engine.log(
                f"Grace period over: aborting {engine.inflight} in-flight requests", "WARNING", "launcher.py"
            )
        await engine.scheduler.close()
        for peer_link in engine.links.open_links():
            peer = self._by_address.get(peer_link.peer_address)
            if peer is not None:
                peer.links.close(engine.name)
        engine.log("Finished server process", source="uvicorn")
        self._engines.pop(pod_key, None)
        if self._by_socket.get((engine.ip, engine.port)) is engine:
            del self._by_socket[(engine.ip, engine.port)]
        if self._by_address.get(engine.address) is engine:
            del self._by_address[engine.address]
        self._keep_logs(pod_key, list(engine.log_lines))

    async def close(self) -> None:
        await asyncio.gather(*(self.stop(key, 0) for key in list(self._engines)))
        await self._real.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- queries ------------------------------------------------------------------------------
    def is_healthy(self, pod_key: str) -> bool:
        engine = self._engines.get(pod_key)
        return (engine is not None and engine.healthy()) or self._real.is_healthy(pod_key)

    def has_crashed(self, pod_key: str) -> bool:
        engine = self._engines.get(pod_key)
        return (engine is not None and engine.crashed) or self._real.has_crashed(pod_key)

    def logs(self, pod_key: str) -> list[str]:
        engine = self._engines.get(pod_key)
        if engine is not None:
            return list(engine.log_lines)
        real = self._real.logs(pod_key)
        if real is not None:
            return real
        return list(self._old_logs.get(pod_key, []))

    def address(self, pod_key: str) -> tuple[str, int] | None:
        engine = self._engines.get(pod_key)
        return (engine.ip, engine.port) if engine else self._real.address(pod_key)

    def role(self, pod_key: str) -> str | None:
        """The engine's current role (it changes with `POST /kv/switch_role`)."""
        engine = self._engines.get(pod_key)
        return engine.role if engine else None

    def engine(self, pod_key: str) -> SimEngine | None:
        return self._engines.get(pod_key)

    def __len__(self) -> int:
        return len(self._engines) + len(self._real.pods)

    def lookup(self, target: str) -> SimEngine | None:
        """An engine by `ip:port`, by pod IP or by pod name (`name` or `namespace/name`)."""
        if target in self._by_address:
            return self._by_address[target]
        if target in self._engines:
            return self._engines[target]
        for engine in self._engines.values():
            if engine.name == target or engine.ip == target:
                return engine
        return None

    # --- internals ----------------------------------------------------------------------------
    def _role_changed(self, pod_key: str, role: str) -> None:
        if self.on_role_change is not None:
            self.on_role_change(pod_key, role)

    def _planes_of(self, request: web.Request) -> frozenset[str]:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        return self._planes.get((sockname[0], sockname[1]), ALL) if sockname else ALL

    def plane_address(self, pod_key: str, plane: str) -> tuple[str, int] | None:
        """Where a MindIE engine serves ``plane`` (``management`` or ``metrics``): its own port, or the
        service port when its config puts the plane there."""
        engine = self._engines.get(pod_key)
        if engine is None:
            return None
        return engine.ip, engine.plane_ports.get(plane, engine.port)

    def _resolve(self, request: web.Request) -> SimEngine | None:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        if not sockname:
            return None
        return self._by_socket.get((sockname[0], sockname[1]))

    def _on_crash(self, engine: SimEngine) -> None:
        sites = [self._sites.pop(engine.pod_key, None), *self._plane_sites.pop(engine.pod_key, [])]
        for site in sites:
            if site is None:
                continue
            task = asyncio.get_running_loop().create_task(site.stop())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        engine.scheduler.drop_all_held()
        for seq in list(engine.scheduler.running) + list(engine.scheduler.waiting):
            engine.scheduler.abort(seq, "EngineDeadError: EngineCore encountered an issue.")

    def _keep_logs(self, pod_key: str, lines: list[str]) -> None:
        self._old_logs[pod_key] = lines
        self._old_logs.move_to_end(pod_key)
        while len(self._old_logs) > KEPT_LOGS:
            self._old_logs.popitem(last=False)
