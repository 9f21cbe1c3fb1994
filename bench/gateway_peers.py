"""What bench/gateway_vs_litellm.py puts behind and in front of the gateways.

- ``echo``: a constant-time OpenAI-compatible upstream on raw asyncio + uvloop (pre-built answers,
  streamed as one chunk per event), so the gateway's own cost is not drowned by the upstream's.
- ``sim``: a simulated P/D stack (sandbox engines + router) serving like a cluster.
- LiteLLM's proxy from its own virtualenv, offline, one worker, configured with the same upstreams.
- Tandem: the gateway (uvicorn, one worker) on the bench database, a topology per upstream and an
  inference key with limits, so every request runs the limit script.

    .venv/bin/python bench/gateway_peers.py echo | sim [--time-scale 0.05] [--model NAME]
    .venv/bin/python bench/gateway_peers.py gateway --profile OUT --port PORT   # under cProfile
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.request import urlopen

from telemetry_fanout import free_port
from uvicorn._compat import asyncio_run

ROOT = Path(__file__).resolve().parent.parent
COMPLETION_TOKENS = 8
LITELLM_MASTER_KEY = "sk-bench-master-key"
LITELLM_OFFLINE = {
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    "LITELLM_LOCAL_POLICY_TEMPLATES": "True",
    "LITELLM_DISABLE_LATEST_RELEASE_CHECK": "true",
    "LITELLM_TELEMETRY_DISABLED": "true",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
    "HF_HUB_OFFLINE": "1",
    "LITELLM_LOG": "ERROR",  # its production setting: no per-request access log line
    "TRANSFORMERS_OFFLINE": "1",
}


# ---------------------------------------------------------------- the constant-time upstream


def _answers(model: str) -> tuple[bytes, list[bytes], bytes]:
    """(a chat completion, the stream's events without usage, the usage event) for `model`."""
    usage = {
        "prompt_tokens": 12,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": 12 + COMPLETION_TOKENS,
    }
    base = {"id": "chatcmpl-bench", "created": 1767225600, "model": model}
    message = {"role": "assistant", "content": " ".join(["token"] * COMPLETION_TOKENS)}
    whole = {
        **base,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage,
    }
    events = []
    for i in range(COMPLETION_TOKENS):
        delta = {"role": "assistant", "content": "token"} if i == 0 else {"content": " token"}
        last = i == COMPLETION_TOKENS - 1
        chunk = {
            **base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": "stop" if last else None}],
        }
        events.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    usage_event = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
    return json.dumps(whole).encode(), events, b"data: " + json.dumps(usage_event).encode() + b"\n\n"


def _responses_answers(model: str) -> tuple[bytes, list[bytes]]:
    """(a Response object, its event stream) for `model`, in the order vLLM writes them."""
    text = " ".join(["token"] * COMPLETION_TOKENS)
    usage = {"input_tokens": 12, "output_tokens": COMPLETION_TOKENS, "total_tokens": 12 + COMPLETION_TOKENS}
    part = {"type": "output_text", "text": text, "annotations": []}
    item = {
        "type": "message",
        "id": "msg_bench",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }
    base = {"id": "resp_bench", "object": "response", "created_at": 1767225600, "model": model}
    whole = {**base, "status": "completed", "output": [item], "usage": usage}
    opening = {**base, "status": "in_progress", "output": [], "usage": None}
    where = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
    steps: list[tuple[str, dict[str, object]]] = [
        ("response.created", {"response": opening}),
        ("response.in_progress", {"response": opening}),
        (
            "response.output_item.added",
            {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}},
        ),
        ("response.content_part.added", {**where, "part": {**part, "text": ""}}),
        *[
            ("response.output_text.delta", {**where, "delta": "token" if i == 0 else " token"})
            for i in range(COMPLETION_TOKENS)
        ],
        ("response.output_text.done", {**where, "text": text}),
        ("response.content_part.done", {**where, "part": part}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": whole}),
    ]
    events = [
        f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': n, **data})}\n\n".encode()
        for n, (kind, data) in enumerate(steps)
    ]
    return json.dumps(whole).encode(), events


def _content_length(head: bytes) -> int:
    start = head.find(b"content-length:")
    if start < 0:
        return 0
    stop = head.find(b"\r\n", start)
    return int(head[start + 15 : stop if stop >= 0 else len(head)])


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class EchoServer(asyncio.Protocol):
    """HTTP/1.1 keep-alive; POST .../chat/completions and .../responses answered at once, GET .../models
    listed."""

    cache: dict[tuple[object, ...], list[bytes]] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length = _content_length(head)
            if len(self.buffer) < end + 4 + length:
                return
            body, self.buffer = self.buffer[end + 4 : end + 4 + length], self.buffer[end + 4 + length :]
            for piece in self.answer(head.split(b" ", 2)[:2], body):
                self.transport.write(piece)

    def answer(self, request_line: list[bytes], body: bytes) -> list[bytes]:
        method, path = request_line
        if method == b"get" and path.endswith(b"/models"):
            listing = json.dumps(
                {"object": "list", "data": [{"id": "bench/echo", "object": "model"}]}
            ).encode()
            return [_response(b"application/json", listing)]
        if method == b"post" and path.endswith(b"/responses"):
            return self.responses(body)
        if method != b"post" or not path.endswith(b"/chat/completions"):
            return [
                _response(
                    b"application/json", b'{"error": {"message": "not found"}}', status=b"404 Not Found"
                )
            ]
        request = json.loads(body)
        stream = bool(request.get("stream"))
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        key = (str(request.get("model")), stream, usage)
        found = self.cache.get(key)
        if found is None:
            whole, events, usage_event = _answers(key[0])
            if not stream:
                found = [_response(b"application/json", whole)]
            else:
                head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                head += b"transfer-encoding: chunked\r\n\r\n"
                parts = [*events, *([usage_event] if usage else []), b"data: [DONE]\n\n"]
                found = [head + _chunk(parts[0]), *[_chunk(p) for p in parts[1:]], b"0\r\n\r\n"]
            self.cache[key] = found
        return found

    def responses(self, body: bytes) -> list[bytes]:
        request = json.loads(body)
        stream = bool(request.get("stream"))
        key = (str(request.get("model")), stream, True, "responses")
        found = self.cache.get(key)
        if found is None:
            whole, events = _responses_answers(key[0])
            if not stream:
                found = [_response(b"application/json", whole)]
            else:
                head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                head += b"transfer-encoding: chunked\r\n\r\n"
                found = [head + _chunk(events[0]), *[_chunk(e) for e in events[1:]], b"0\r\n\r\n"]
            self.cache[key] = found
        return found


def _response(content_type: bytes, body: bytes, *, status: bytes = b"200 OK") -> bytes:
    return b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (
        status,
        content_type,
        len(body),
        body,
    )


async def serve_echo() -> None:
    server = await asyncio.get_running_loop().create_server(EchoServer, "127.0.0.1", 0, backlog=4096)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    await _until_stdin_closes()
    server.close()


async def serve_sim(model: str, time_scale: float) -> None:
    sys.path.insert(0, str(ROOT))
    from sandbox.engine.testing import PDStack

    async with PDStack(model=model, env={"SANDBOX_TIME_SCALE": str(time_scale)}) as stack:
        print(stack.router_url, flush=True)
        await _until_stdin_closes()


async def _until_stdin_closes() -> None:
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


class Child:
    """A server subprocess of this module (or any command) that prints its URL on its first line."""

    def __init__(
        self, argv: list[str], *, env: dict[str, str] | None = None, log: Path | None = None
    ) -> None:
        self.argv = argv
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> Child:
        self.proc = subprocess.Popen(
            self.argv,
            cwd=ROOT,
            env=self.env if self.env is not None else dict(os.environ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.log, "w") if self.log else None,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://127."):
            raise RuntimeError(f"{self.argv[:3]} did not start: {self.url!r}")
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def echo_upstream() -> Child:
    return Child([sys.executable, __file__, "echo"])


def sim_upstream(model: str, time_scale: float) -> Child:
    return Child([sys.executable, __file__, "sim", "--model", model, "--time-scale", str(time_scale)])


# ---------------------------------------------------------------- LiteLLM's proxy


def litellm_version(venv: Path) -> str:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
        env={**_litellm_env(), "PATH": os.environ.get("PATH", "")},
        check=True,
    )
    return out.stdout.strip()


def _litellm_env() -> dict[str, str]:
    """A clean environment: offline, no DATABASE_URL/REDIS_URL of ours, no proxies."""
    keep = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    return {**keep, **LITELLM_OFFLINE, "PYTHONUNBUFFERED": "1"}


class LiteLLM:
    """`litellm --config` on a free loopback port with one worker, a master key and no database."""

    def __init__(self, venv: Path, models: dict[str, str], port: int, log: Path) -> None:
        self.venv = venv
        self.models = models  # model name -> upstream base URL (ending in /v1)
        self.port = port
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir = tempfile.TemporaryDirectory(prefix="bench-litellm-")

    def __enter__(self) -> LiteLLM:
        import yaml

        config = {
            "model_list": [
                {
                    "model_name": name,
                    "litellm_params": {"model": f"openai/{name}", "api_base": base, "api_key": "sk-upstream"},
                }
                for name, base in self.models.items()
            ],
            "general_settings": {"master_key": LITELLM_MASTER_KEY},
            "litellm_settings": {"set_verbose": False},
        }
        path = Path(self.dir.name) / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        out = open(self.log, "wb")
        self.proc = subprocess.Popen(
            [
                *(str(self.venv / "bin" / "litellm"), "--config", str(path), "--host", "127.0.0.1"),
                *("--port", str(self.port), "--num_workers", "1"),
            ],
            cwd=self.dir.name,
            env=_litellm_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"LiteLLM exited with {self.proc.returncode}; see {self.log}")
            try:
                with urlopen(f"http://127.0.0.1:{self.port}/health/liveliness", timeout=1) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"LiteLLM did not become ready within 120 s; see {self.log}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.dir.cleanup()


# ---------------------------------------------------------------- Tandem


class TandemGateway:
    """controlplane.asgi under uvicorn, one worker (optionally under cProfile, dumped on exit)."""

    def __init__(
        self,
        log: Path,
        profile: Path | None = None,
        stalls: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.env = env or {}
        self.log = log
        self.profile = profile
        self.stalls = stalls
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> TandemGateway:
        argv = [sys.executable, "-m", "uvicorn", "controlplane.asgi:application", "--host", "127.0.0.1"]
        argv += ["--port", str(self.port), "--log-level", "warning", "--no-access-log"]
        argv += ["--no-proxy-headers", "--no-server-header"]  # as docker/Dockerfile serves it
        if self.profile is not None or self.stalls is not None:
            argv = [sys.executable, __file__, "gateway", "--port", str(self.port)]
            argv += ["--profile", str(self.profile)] if self.profile is not None else []
            argv += ["--stalls", str(self.stalls)] if self.stalls is not None else []
        out = open(self.log, "wb")
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env={**os.environ, **self.env}, stdout=out, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.__exit__()  # no uvicorn left behind
        raise RuntimeError(f"the gateway did not answer /healthz within 60 s; see {self.log}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def serve_watched(out: str | None, stalls: str | None, port: int) -> None:
    """uvicorn in this process, under cProfile (CPU time of its main thread) and/or a watch of its event
    loop's stalls (bench/loop_stalls.py); each written when it stops."""
    import cProfile

    import uvicorn
    from loop_stalls import StallWatch

    sys.path.insert(0, str(ROOT))
    config = uvicorn.Config(
        "controlplane.asgi:application", host="127.0.0.1", port=port, log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]  # it re-raises SIGTERM
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    config.load()  # import the app before profiling starts
    watch = StallWatch() if stalls else None

    async def serve() -> None:
        if watch is not None:
            watch.start(asyncio.get_running_loop())
        await server.serve()

    profile = cProfile.Profile(time.thread_time) if out else None  # CPU time: neighbours not counted
    if profile is not None:
        profile.enable()
    asyncio_run(serve(), loop_factory=config.get_loop_factory())
    if profile is not None:
        profile.disable()
        profile.dump_stats(out)
    if watch is not None and stalls:
        watch.stop(Path(stalls))


def tandem_setup(upstreams: dict[str, str]) -> str:
    """A topology per upstream (model name -> router root URL) with its route; returns a new key's secret."""
    from accounts.models import User
    from clusters.models import Cluster
    from gateway.services import route_update
    from keys.services import key_create
    from topologies.models import Topology
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    admin, _ = User.objects.get_or_create(username="bench-gateway-admin", defaults={"role": "admin"})
    cluster = Cluster.objects.get_or_create(
        name="bench-gateway", defaults={"auth_method": "token", "server": "http://127.0.0.1:9"}
    )[0]
    for model, url in upstreams.items():
        name = "bench-" + model.rsplit("/", 1)[-1]
        topology = Topology.objects.filter(cluster=cluster, name=name).first()
        if topology is None:
            spec = preset_spec("qwen-gpu-nixl")
            spec.update(name=name, model_name=model)
            spec["routing"]["model_name"] = model
            topology = topology_create(cluster=cluster, spec=spec, actor=admin)
        route_update(topology=topology, changes={"endpoint_url": url}, actor=admin)
    issued = key_create(
        actor=admin,
        owner=admin,
        name=f"bench {time.strftime('%H:%M:%S')}",
        purpose="production",
        limits_given={
            "requests_per_minute": 10_000_000,
            "tokens_per_minute": 1_000_000_000,
            "max_concurrent": 4096,
            "requests_per_day": 1_000_000_000,
            "tokens_per_day": 1_000_000_000_000,
        },
    )
    return issued.secret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("echo", "sim", "gateway"))
    parser.add_argument("--model", default="bench/sim")
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--profile", help="gateway: write a cProfile here when it stops")
    parser.add_argument("--stalls", help="gateway: write its event loop's stalls here when it stops")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.kind == "gateway":
        serve_watched(args.profile, args.stalls, args.port)
        return
    import uvloop

    if args.kind == "echo":
        uvloop.run(serve_echo())
    else:
        uvloop.run(serve_sim(args.model, args.time_scale))


if __name__ == "__main__":
    main()
