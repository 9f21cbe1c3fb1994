"""Helpers to run simulated engines and a P/D router in-process (tests, benchmarks, demos).

`PDStack` starts `prefill` + `decode` engines per group on a private 127.x.y.0/24 range with free
ports and a router in front of them:

    async with PDStack(groups=1, prefill=1, decode=1, env={"SANDBOX_TIME_SCALE": "0.2"}) as stack:
        url = stack.router_url
"""

from __future__ import annotations

import random
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType

from sandbox.engine.farm import EngineFarm
from sandbox.engine.spec import EngineSpec
from sandbox.router.farm import Endpoint, RouterFarm, RouterSpec

CONNECTOR_FOR = {"vllm": "NixlConnector", "sglang": "mooncake", "mindie": "llm-datadist"}


def loopback_base() -> str:
    """A 127.a.b prefix whose .1 address is free to bind (random, so parallel runs don't collide)."""
    for _ in range(50):
        base = f"127.{random.randint(100, 250)}.{random.randint(0, 255)}"
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((f"{base}.1", 0))
            except OSError:
                continue
        return base
    raise RuntimeError("no free 127.x.y.0/24 loopback range")


def engine_spec(
    role: str,
    *,
    engine: str = "vllm",
    model: str = "sim-model",
    kv_connector: str | None = "default",
    mooncake_master: str | None = None,
    args: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
    port: int = 0,
    device_ips: tuple[str, ...] = (),
) -> EngineSpec:
    connector = CONNECTOR_FOR[engine] if kv_connector == "default" and role != "both" else kv_connector
    if kv_connector == "default" and role == "both":
        connector = None
    if engine == "mindie":
        env = {"MIES_SERVICE_MONITOR_MODE": "1", **(env or {})}
    return EngineSpec(
        engine=engine,
        role=role,
        model=model,
        port=port,
        kv_connector=connector,
        mooncake_master=mooncake_master,
        args=args or ((model,) if engine == "vllm" else ("--model-path", model)),
        env=tuple(sorted((env or {}).items())),
        device_ips=device_ips,
    )


@dataclass
class PDStack:
    groups: int = 1
    prefill: int = 1
    decode: int = 1
    engine: str = "vllm"
    model: str = "sim-model"
    kv_connector: str | None = "default"  # the engine's default connector (CONNECTOR_FOR), or a name
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    timeout_seconds: float = 30.0
    retry_attempts: int = 2
    retry_interval_seconds: float = 0.01
    farm: EngineFarm = field(default_factory=EngineFarm)
    routers: RouterFarm = field(default_factory=RouterFarm)
    pods: list[tuple[str, str, str]] = field(default_factory=list)  # (pod name, role, group)
    npus: int = 0  # NPUs per engine: device IPs 192.168.<host>.<100 + i>, as the sandbox's device plugin
    base: str = ""

    async def __aenter__(self) -> PDStack:
        self.base = loopback_base()
        host = 1
        for g in range(self.groups):
            for role, count in (("prefill", self.prefill), ("decode", self.decode)):
                for i in range(count):
                    name = f"{role}-{g}-{i}"
                    host += 1
                    spec = engine_spec(
                        role,
                        engine=self.engine,
                        model=self.model,
                        kv_connector=self.kv_connector,
                        env=self.env,
                        args=self.args,
                        device_ips=tuple(f"192.168.{host}.{100 + n}" for n in range(self.npus)),
                    )
                    labels = {
                        "modelserving.volcano.sh/role": role,
                        "modelserving.volcano.sh/group-name": f"g{g}",
                    }
                    await self.farm.start(f"sim/{name}", f"{self.base}.{host}", spec, labels)
                    self.pods.append((name, role, f"g{g}"))
        route = RouterSpec(self.model, self.timeout_seconds, self.retry_attempts, self.retry_interval_seconds)
        await self.routers.start("sim/router", f"{self.base}.1", 0, route, self.endpoints)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.routers.close()
        await self.farm.close()

    def endpoints(self) -> list[Endpoint]:
        out = []
        for name, role, group in self.pods:
            address = self.farm.address(f"sim/{name}")
            if address is None:
                continue
            ready = self.farm.is_healthy(f"sim/{name}")
            out.append(Endpoint(name, address[0], address[1], role, group, ready))
        return out

    def url(self, pod: str) -> str:
        address = self.farm.address(f"sim/{pod}")
        assert address is not None, pod
        return f"http://{address[0]}:{address[1]}"

    @property
    def router_url(self) -> str:
        address = self.routers.address("sim/router")
        assert address is not None
        return f"http://{address[0]}:{address[1]}"
