"""A real gateway (uvicorn subprocess on the test database) in front of simulated P/D stacks."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sandbox.engine.testing import PDStack
from tests.support import ROOT, VENV_BIN, free_port, http_get, stop, subprocess_env, wait_until

MODEL = "Qwen/Qwen3-0.6B"
FALLBACK_MODEL = "fallback-model"


class StackThread:
    """A PDStack (engines + router) serving from its own event loop in a thread."""

    def __init__(self, model: str, **kwargs: Any) -> None:
        self.model = model
        self.kwargs = kwargs
        self.loop = asyncio.new_event_loop()
        self.stack: PDStack | None = None
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> StackThread:
        self.thread.start()
        self.stack = asyncio.run_coroutine_threadsafe(
            PDStack(model=self.model, env={"SANDBOX_TIME_SCALE": "0.05"}, **self.kwargs).__aenter__(),
            self.loop,
        ).result(30)
        return self

    @property
    def url(self) -> str:
        assert self.stack is not None
        return self.stack.router_url

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def __exit__(self, *exc: object) -> None:
        if self.stack is not None:
            self.run(self.stack.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="session")
def cluster_stack() -> Iterator[StackThread]:
    with StackThread(MODEL) as stack:
        yield stack


@pytest.fixture(scope="session")
def fallback_stack() -> Iterator[StackThread]:
    with StackThread(FALLBACK_MODEL) as stack:
        yield stack


@dataclass
class Gateway:
    base: str
    topology: Any
    secret: str
    key: Any
    log: Path

    def route(self, **changes: Any) -> None:
        from gateway.services import route_update

        route_update(topology=self.topology, changes=changes, actor=self.key.owner)
        time.sleep(1.2)  # gateway processes look for route changes once a second


@contextmanager
def running_gateway(log: Path | None = None, **env: str) -> Iterator[str]:
    """uvicorn on a free port; its output goes to `log` (printed by the test on failure)."""
    port = free_port()
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "uvicorn"),
            "controlplane.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--timeout-graceful-shutdown",
            "2",
        ],
        cwd=ROOT,
        env=subprocess_env(**{"LOG_LEVEL": "warning", **env}),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_get(base + "/healthz", timeout=1)[0] > 0, 30, "uvicorn", proc)
        yield base
    finally:
        stop(proc)
        if log:
            out.close()  # type: ignore[union-attr]


@pytest.fixture
def make_topology(transactional_db, admin_user):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    def make(name: str = "qwen3-nixl") -> Any:
        cluster = Cluster.objects.get_or_create(
            name="lab", defaults={"auth_method": "token", "server": "http://127.0.0.1:9"}
        )[0]
        spec = {**preset_spec("qwen-gpu-nixl"), "name": name}
        return topology_create(cluster=cluster, spec=spec, actor=admin_user)

    return make


@pytest.fixture
def inference_key(admin_user):
    from keys import services

    def make(**kwargs: Any) -> Any:
        kwargs.setdefault("name", "app")
        kwargs.setdefault("purpose", "production")
        return services.key_create(actor=admin_user, owner=admin_user, **kwargs)

    return make


@pytest.fixture
def gateway(make_topology, inference_key, cluster_stack, admin_user, tmp_path, request) -> Iterator[Gateway]:
    from gateway.services import route_update

    topology = make_topology()
    route_update(
        topology=topology, changes={"endpoint_url": cluster_stack.url, "aliases": ["qwen"]}, actor=admin_user
    )
    issued = inference_key()
    log = tmp_path / "gateway.log"
    with running_gateway(log) as base:
        yield Gateway(base=base, topology=topology, secret=issued.secret, key=issued.key, log=log)
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print("gateway log:\n" + log.read_text(errors="replace")[-4000:])


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


class ScriptedThread:
    """tests.scripted_upstream in a thread of its own: a chat-completions edge that calls a tool first."""

    def __init__(self, model: str) -> None:
        from tests.scripted_upstream import Upstream

        self.upstream = Upstream(model=model)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.url = ""

    def __enter__(self) -> ScriptedThread:
        from aiohttp import web

        from tests.support import free_port

        self.thread.start()
        port = free_port()

        async def start() -> web.AppRunner:
            runner = web.AppRunner(self.upstream.app(), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            return runner

        self.runner = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        self.url = f"http://127.0.0.1:{port}"
        return self

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.upstream.requests

    @property
    def tokenized(self) -> list[int]:
        return self.upstream.tokenized

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def scripted_gateway(make_topology, inference_key, admin_user, tmp_path, request) -> Iterator[Any]:
    """The gateway in front of the scripted upstream, on a topology whose engine (SGLang) serves no
    /v1/responses, so Responses requests are translated to chat completions."""
    from gateway.services import route_update
    from topologies.models import Topology

    with ScriptedThread(MODEL) as upstream:
        topology = make_topology("scripted")
        Topology.objects.filter(pk=topology.pk).update(engine="sglang")
        route_update(
            topology=topology,
            changes={"endpoint_url": upstream.url, "aliases": ["gpt-5-codex", "claude-sonnet-4-5"]},
            actor=admin_user,
        )
        issued = inference_key(name="assistant", purpose="coding-assistant")
        log = tmp_path / "gateway.log"
        with running_gateway(log) as base:
            gw = Gateway(base=base, topology=topology, secret=issued.secret, key=issued.key, log=log)
            gw.upstream = upstream  # type: ignore[attr-defined]
            yield gw
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print("gateway log:\n" + log.read_text(errors="replace")[-4000:])
