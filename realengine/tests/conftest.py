"""A real vLLM and the sandbox's simulated vLLM, side by side, configured alike (model name, context)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from realengine import install
from realengine.engine import CONTEXT, MODEL_NAME, Engine
from sandbox.engine.farm import EngineFarm
from sandbox.engine.testing import engine_spec, loopback_base
from tests.support import free_port

# Tool calls as vLLM 0.32 serves them: "required" and named tool choices need a tool parser, "auto" also
# --enable-auto-tool-choice. Hermes' parser reads the tiny model's chat template (realengine/model.py).
# A test module sets ENGINE_FLAGS to start both engines with other flags.
TOOL_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")


def engine_flags(request: pytest.FixtureRequest) -> tuple[str, ...]:
    return tuple(getattr(request.module, "ENGINE_FLAGS", TOOL_FLAGS))


@pytest.fixture(scope="module")
def real_vllm(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[str]:
    """A real vLLM (CPU build) serving the tiny model. Installing it is part of the run: when that fails,
    the run fails and says which command repeats it; nothing is skipped."""
    try:
        install.install()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    log = Path(tmp_path_factory.mktemp("real-vllm")) / "engine.log"
    engine = Engine(host="127.0.0.1", port=free_port(), log=log, args=list(engine_flags(request))).start()
    try:
        engine.wait_ready()
        yield engine.base
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def sim_vllm(request: pytest.FixtureRequest) -> Iterator[str]:
    """The sandbox's simulated vLLM as a pod of the demo would run it, on its own event loop."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    farm = EngineFarm()
    spec = engine_spec(
        "both", model=MODEL_NAME,
        args=(MODEL_NAME, "--max-model-len", str(CONTEXT), "--enable-prefix-caching", *engine_flags(request)),
        env={"SANDBOX_TIME_SCALE": "0.05"},
    )  # fmt: skip
    asyncio.run_coroutine_threadsafe(
        farm.start("conf/vllm-0", f"{loopback_base()}.2", spec, {}), loop
    ).result(30)
    address = farm.address("conf/vllm-0")
    assert address is not None
    try:
        yield f"http://{address[0]}:{address[1]}"
    finally:
        asyncio.run_coroutine_threadsafe(farm.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


@pytest.fixture(scope="package")
def real_sandbox() -> Iterator[object]:
    """A sandbox cluster whose vLLM pods run the real engine (``SANDBOX_REAL_ENGINES=vllm``), shared by the
    modules that deploy topologies to it (each in a namespace of its own)."""
    from sandbox.testing import SandboxCluster

    try:
        install.install()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    with SandboxCluster(
        nodes=2, accelerators=["nvidia.com/gpu=8"], env={"SANDBOX_REAL_ENGINES": "vllm"}
    ) as cluster:
        yield cluster


@pytest.fixture(params=["real", "sim"])
def engine_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_vllm"))
