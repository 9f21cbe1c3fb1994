"""Pods served by a real engine process instead of a simulated one (``SANDBOX_REAL_ENGINES=vllm``).

A vLLM pod then runs the real vLLM for the CPU (``realengine``) on the pod's own address and port,
serving the tiny model under the pod's served model name; its log is the process's output, read through
``pods/log`` like any pod's. Everything Tandem does with the pod goes to the real engine: metrics by
every source, the router, the gateway, the probes, link health, drift and rollback.

What the pod's arguments become (the CPU build can take only some of them):

- kept: ``--max-model-len``, ``--max-num-seqs``, ``--enable-prefix-caching`` /
  ``--no-enable-prefix-caching``; a ``--max-model-len`` above the tiny model's context is refused by the
  engine itself, as it would be on a cluster; a P/D pod's ``--max-num-batched-tokens`` is its context
  (ExampleConnector cannot inject a prompt that was prefilled in chunks);
- the KV connector: NIXL and Mooncake cannot run on these CPUs, so a P/D pod gets vLLM's
  ``ExampleConnector`` (KV handed over as files under one directory per namespace), prefill as
  ``kv_producer``, decode as ``kv_consumer``: a real transfer, through a different medium;
- dropped: device settings (``--tensor-parallel-size``, ``--gpu-memory-utilization``, ...), which have
  no meaning on one CPU core.

Each engine is bound to one core in turn (``VLLM_CPU_OMP_THREADS_BIND``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from realengine.engine import CONTEXT, Engine
from sandbox.engine.spec import EngineSpec

KEPT_VALUE_FLAGS = ("--max-model-len", "--max-num-seqs")
KEPT_SWITCHES = ("--enable-prefix-caching", "--no-enable-prefix-caching", "--enable-auto-tool-choice")
# The tiny model's chat template writes tool calls in Hermes' format, whatever the pod's model family.
TOOL_PARSER = "hermes"
KV_ROLES = {"prefill": "kv_producer", "decode": "kv_consumer"}
HEALTH_INTERVAL = 0.5
LOG_LINES = 2000


def wants_real(spec: EngineSpec, env: dict[str, str]) -> bool:
    kinds = {kind.strip() for kind in env.get("SANDBOX_REAL_ENGINES", "").split(",") if kind.strip()}
    return spec.engine in kinds


def engine_args(spec: EngineSpec, kv_dir: Path) -> list[str]:
    """The real engine's flags for this pod's spec (see the module docstring)."""
    out: list[str] = []
    args = list(spec.args)
    for index, arg in enumerate(args):
        name, _, inline = arg.partition("=")
        if name in KEPT_VALUE_FLAGS:
            value = inline or (args[index + 1] if index + 1 < len(args) else "")
            out += [name, value]
        elif arg in KEPT_SWITCHES:
            out.append(arg)
        elif name == "--tool-call-parser":
            out += [name, TOOL_PARSER]
    if spec.role in KV_ROLES and spec.kv_connector:
        # ExampleConnector saves a prompt's KV as one file per forward: a prompt prefilled in several
        # chunks (--max-num-batched-tokens below its length) cannot be injected on the decode (vLLM 0.32:
        # "shape mismatch: value tensor of shape [8192, ...] ... [8576, ...]", and the decode dies), so a
        # P/D pod prefills a whole context in one step
        context = out[out.index("--max-model-len") + 1] if "--max-model-len" in out else str(CONTEXT)
        out += ["--max-num-batched-tokens", context]
        config = {
            "kv_connector": "ExampleConnector",
            "kv_role": KV_ROLES[spec.role],
            "kv_connector_extra_config": {"shared_storage_path": str(kv_dir)},
        }
        out += ["--kv-transfer-config", json.dumps(config)]
    return out


@dataclass
class RealPod:
    engine: Engine
    healthy: bool = False
    watcher: asyncio.Task[None] | None = None


@dataclass
class RealEngines:
    """The real engine processes of one sandbox, by pod key."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tandem-real-engines-")))
    pods: dict[str, RealPod] = field(default_factory=dict)
    cores: itertools.cycle[str] = field(default_factory=lambda: itertools.cycle(_cores()))

    async def start(self, pod_key: str, ip: str, spec: EngineSpec) -> int:
        """Start the pod's engine on ``ip``; the port it listens on."""
        namespace, _, name = pod_key.rpartition("/")
        kv_dir = self.root / "kv" / (namespace or "default")
        kv_dir.mkdir(parents=True, exist_ok=True)
        port = spec.port or 8000
        engine = Engine(
            host=ip, port=port, log=self.root / "logs" / f"{namespace}--{name}.log",
            args=engine_args(spec, kv_dir), cores=next(self.cores), served_name=spec.model,
        )  # fmt: skip
        engine.log.unlink(missing_ok=True)
        python, model = await asyncio.to_thread(engine.prepare)
        engine.spawn(python, model)  # on the loop's thread, which lives as long as the sandbox
        pod = RealPod(engine)
        pod.watcher = asyncio.get_running_loop().create_task(self._watch(pod))
        self.pods[pod_key] = pod
        return port

    async def _watch(self, pod: RealPod) -> None:
        timeout = aiohttp.ClientTimeout(total=2)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while pod.engine.process is not None and pod.engine.process.poll() is None:
                try:
                    async with session.get(f"{pod.engine.base}/health") as response:
                        pod.healthy = response.status == 200
                except (aiohttp.ClientError, TimeoutError):
                    pod.healthy = False
                await asyncio.sleep(HEALTH_INTERVAL)
        pod.healthy = False

    async def stop(self, pod_key: str) -> list[str]:
        """Stop the pod's engine; its log lines."""
        pod = self.pods.pop(pod_key, None)
        if pod is None:
            return []
        if pod.watcher is not None:
            pod.watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pod.watcher
        await asyncio.to_thread(pod.engine.stop)
        return log_lines(pod.engine.log)

    def is_healthy(self, pod_key: str) -> bool:
        pod = self.pods.get(pod_key)
        return pod is not None and pod.healthy

    def has_crashed(self, pod_key: str) -> bool:
        pod = self.pods.get(pod_key)
        process = pod.engine.process if pod is not None else None
        return process is not None and process.poll() is not None

    def logs(self, pod_key: str) -> list[str] | None:
        pod = self.pods.get(pod_key)
        return log_lines(pod.engine.log) if pod is not None else None

    def address(self, pod_key: str) -> tuple[str, int] | None:
        pod = self.pods.get(pod_key)
        return (pod.engine.host, pod.engine.port) if pod is not None else None

    async def close(self) -> None:
        await asyncio.gather(*(self.stop(key) for key in list(self.pods)))
        shutil.rmtree(self.root, ignore_errors=True)


def log_lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-LOG_LINES:]
    except OSError:
        return []


def _cores() -> list[str]:
    count = os.cpu_count() or 1
    return [str(core) for core in range(count)]
