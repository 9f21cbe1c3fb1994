"""P/D routers materialised by the sandbox (one per ModelServer/ModelRoute or router Service).

Each request goes to a prefill pod (prefix affinity, else least loaded) with
`kv_transfer_params: {do_remote_decode: true}` and `max_tokens: 1`, then — with the prefill's
`kv_transfer_params` (the request as it came when the prefill returns none, as with vLLM's
ExampleConnector) — to a decode pod of the same group, whose answer (streamed or not) is relayed.
`RouterSpec.timeout_seconds` bounds the whole request (504 `timeout`); a failed attempt (connection
error, 5xx, a non-JSON prefill answer) is retried `retry_attempts` times, `retry_interval_seconds`
apart, avoiding the pods that just failed. Client errors (400/401/403/404) pass through unretried.
All routers share one aiohttp runner and one upstream session; the local ip:port picks the router.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from perfmodel.model.routing import AFFINITY_BLOCKS, AffinityTable, Choice, choose
from sandbox.engine.tokens import block_hashes, chat_prompt, tokenize
from sandbox.router.matching import PrefixStore
from sandbox.router.metrics import RouterStats

BLOCK_SIZE = 16


@dataclass(frozen=True)
class Endpoint:
    pod_name: str
    ip: str
    port: int
    role: str
    group: str
    ready: bool


@dataclass(frozen=True)
class RouterSpec:
    model_name: str
    timeout_seconds: float
    retry_attempts: int
    retry_interval_seconds: float
    # False: the `round-robin` policy, prefixes ignored (no affinity lookup, no match-ratio observation,
    # as Kthena's router without its prefix-cache score plugin).
    prefix_aware: bool = True


@dataclass
class Router:
    key: str
    ip: str
    port: int
    spec: RouterSpec
    endpoints: Callable[[], list[Endpoint]]
    stats: RouterStats = field(default_factory=RouterStats)
    affinity: AffinityTable = field(default_factory=AffinityTable)
    matches: PrefixStore = field(default_factory=PrefixStore)  # for the match-ratio metric, as Kthena's
    inflight: Counter[str] = field(default_factory=Counter)
    turn: int = 0


class RouteError(Exception):
    def __init__(self, status: int, error_type: str, message: str, pod: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.pod = pod

    def response(self) -> web.Response:
        body = {"error": {"message": str(self), "type": self.error_type, "param": None, "code": self.status}}
        return web.Response(text=json.dumps(body), status=self.status, content_type="application/json")


class Passthrough(Exception):
    """An upstream client error (4xx) relayed as is: retrying would not help."""

    def __init__(self, status: int, body: bytes, content_type: str, retry_after: str | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.content_type = content_type
        self.retry_after = retry_after


def _output_tokens(response: web.StreamResponse) -> int:
    """Completion tokens of a non-streamed answer (what Kthena's connector parses), else 0."""
    body = getattr(response, "body", None)
    if not isinstance(body, bytes):
        return 0
    try:
        usage = json.loads(body).get("usage") or {}
    except (ValueError, AttributeError):
        return 0
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) else 0


def _forwarded(request: web.Request) -> dict[str, str]:
    """Headers relayed to the engines: the client's credentials (engines may run with `--api-key`) and
    its W3C trace context (the router exports no spans of its own: the engines' parent is the caller's)."""
    return {name: request.headers[name] for name in FORWARDED if name in request.headers}


FORWARDED = ("Authorization", "traceparent", "tracestate")


class RouterFarm:
    def __init__(self) -> None:
        self._routers: dict[str, Router] = {}
        self._sites: dict[str, web.TCPSite] = {}
        self._by_socket: dict[tuple[str, int], Router] = {}
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(
        self, key: str, ip: str, port: int, spec: RouterSpec, endpoints: Callable[[], list[Endpoint]]
    ) -> None:
        if key in self._routers:
            await self.stop(key)
        if self._runner is None:
            app = web.Application(client_max_size=32 * 1024 * 1024)
            app.router.add_get("/health", self._health)
            app.router.add_get("/metrics", self._metrics)
            app.router.add_get("/v1/models", self._models)
            app.router.add_post("/v1/completions", self._completions)
            app.router.add_post("/v1/chat/completions", self._chat)
            self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
            await self._runner.setup()
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=2000, limit_per_host=256, enable_cleanup_closed=True)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=None)
            )
        site = web.TCPSite(self._runner, ip, port, reuse_address=True, backlog=1024)
        await site.start()
        server = getattr(site, "_server", None)
        bound = int(server.sockets[0].getsockname()[1]) if server is not None and server.sockets else port
        router = Router(key=key, ip=ip, port=bound, spec=spec, endpoints=endpoints)
        self._routers[key] = router
        self._sites[key] = site
        self._by_socket[(ip, bound)] = router

    async def stop(self, key: str) -> None:
        router = self._routers.pop(key, None)
        site = self._sites.pop(key, None)
        if site is not None:
            await site.stop()
        if router is not None and self._by_socket.get((router.ip, router.port)) is router:
            del self._by_socket[(router.ip, router.port)]

    async def close(self) -> None:
        for key in list(self._routers):
            await self.stop(key)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def address(self, key: str) -> tuple[str, int] | None:
        router = self._routers.get(key)
        return (router.ip, router.port) if router else None

    def router(self, key: str) -> Router | None:
        return self._routers.get(key)

    # --- handlers -----------------------------------------------------------------------------
    def _router(self, request: web.Request) -> Router:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        router = self._by_socket.get((sockname[0], sockname[1])) if sockname else None
        if router is None:
            raise web.HTTPServiceUnavailable(text="router is not running", headers={"Connection": "close"})
        return router

    async def _health(self, request: web.Request) -> web.Response:
        self._router(request)
        return web.Response(text="ok")

    async def _metrics(self, request: web.Request) -> web.Response:
        router = self._router(request)
        name = router.key.rsplit("/", 1)[-1]
        body = router.stats.render(router.spec.model_name, name, name).encode()
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def _models(self, request: web.Request) -> web.Response:
        router = self._router(request)
        card = {"id": router.spec.model_name, "object": "model", "owned_by": "tandem-sandbox-router"}
        return web.json_response({"object": "list", "data": [card]})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "/v1/completions", chat=False)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "/v1/chat/completions", chat=True)

    async def _handle(self, request: web.Request, path: str, chat: bool) -> web.StreamResponse:
        router = self._router(request)
        started = time.monotonic()
        router.stats.active += 1
        status, error = 200, ""
        holder: dict[str, web.StreamResponse] = {}
        try:
            return await asyncio.wait_for(
                self._route(router, request, path, chat, holder), timeout=router.spec.timeout_seconds
            )
        except RouteError as exc:
            status, error = exc.status, exc.error_type
            return self._error_response(exc, holder)
        except Passthrough as exc:
            status, error = exc.status, f"upstream_{exc.status}"
            response = web.Response(body=exc.body, status=exc.status, content_type=exc.content_type)
            if exc.retry_after:
                response.headers["Retry-After"] = exc.retry_after
            return response
        except TimeoutError:
            status, error = 504, "timeout"
            message = f"no answer from the P/D pods within {router.spec.timeout_seconds:g}s (route timeout)"
            return self._error_response(RouteError(504, "timeout", message), holder)
        finally:
            router.stats.active -= 1
            router.stats.finished(path, status, error, time.monotonic() - started)

    @staticmethod
    def _error_response(exc: RouteError, holder: dict[str, web.StreamResponse]) -> web.StreamResponse:
        prepared = holder.get("response")
        if prepared is not None:
            return prepared  # the stream already started: the client sees it end early
        return exc.response()

    async def _route(
        self,
        router: Router,
        request: web.Request,
        path: str,
        chat: bool,
        holder: dict[str, web.StreamResponse],
    ) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RouteError(400, "bad_request", "the request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise RouteError(400, "bad_request", "the request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != router.spec.model_name:
            raise RouteError(404, "model_not_found", f"The model `{model}` does not exist on this route.")
        prompt = chat_prompt(body.get("messages") or []) if chat else str(body.get("prompt") or "")
        hashes = block_hashes(
            tokenize(prompt, BLOCK_SIZE * AFFINITY_BLOCKS), BLOCK_SIZE, limit=AFFINITY_BLOCKS
        )
        exclude: set[str] = set()
        last: RouteError | None = None
        for attempt in range(router.spec.retry_attempts + 1):
            if attempt:
                await asyncio.sleep(router.spec.retry_interval_seconds)
            ready = [e for e in router.endpoints() if e.ready]
            by_name = {e.pod_name: e for e in ready}
            router.turn += 1
            prefills = [(e.pod_name, e.group) for e in ready if e.role == "prefill"]
            decodes = [(e.pod_name, e.group) for e in ready if e.role == "decode"]
            boths = [e.pod_name for e in ready if e.role == "both"]
            choice = choose(
                prefills, decodes, boths, hashes, router.affinity, router.inflight, exclude, router.turn,
                prefix_aware=router.spec.prefix_aware,
            )  # fmt: skip
            if choice is None and exclude:
                # Every pod that could serve this failed once: try them again rather than give up.
                exclude.clear()
                choice = choose(
                    prefills, decodes, boths, hashes, router.affinity, router.inflight, exclude, router.turn,
                    prefix_aware=router.spec.prefix_aware,
                )  # fmt: skip
            if choice is None:
                last = RouteError(
                    503, "no_endpoints", f"no ready prefill/decode pair serves {router.spec.model_name}"
                )
                continue
            if router.spec.prefix_aware:
                candidates = [pod for pod, _ in prefills] if choice.prefill is not None else boths
                router.matches.record(
                    hashes,
                    [pod for pod in candidates if pod not in exclude],
                    (choice.prefill, choice.decode),
                    router.stats.match_ratio.observe,
                )
            if choice.prefill is not None:
                p, d = by_name[choice.prefill], by_name[choice.decode]
                router.stats.log(
                    "I",
                    "router.go:790",
                    f"Attempting PD disaggregated request: prefill={p.ip}:{p.port}, decode={d.ip}:{d.port}",
                )
            try:
                response = await self._attempt(router, request, path, body, hashes, choice, by_name, holder)
            except RouteError as exc:
                last = exc
                if exc.pod:
                    exclude.add(exc.pod)
                if choice.prefill is not None:
                    router.stats.log(
                        "E",
                        "router.go:812",
                        f"proxy failed for prefill pod {choice.prefill}, decode pod {choice.decode}: {exc}",
                    )
                continue
            if choice.prefill is not None:
                router.stats.log(
                    "I",
                    "router.go:830",
                    f"kv connector run successful for prefill pod {choice.prefill}, "
                    f"decode pod {choice.decode}, output tokens: {_output_tokens(response)}",
                )
            return response
        assert last is not None
        raise last

    async def _attempt(
        self,
        router: Router,
        request: web.Request,
        path: str,
        body: dict[str, Any],
        hashes: list[int],
        choice: Choice,
        pods: dict[str, Endpoint],
        holder: dict[str, web.StreamResponse],
    ) -> web.StreamResponse:
        assert self._session is not None
        decode_body = body
        if choice.prefill is not None:
            prefill = pods[choice.prefill]
            kv = await self._prefill(router, prefill, path, body, _forwarded(request))
            router.affinity.remember(hashes, prefill.pod_name)
            decode_body = {**body, "kv_transfer_params": kv} if kv is not None else dict(body)
        else:
            router.affinity.remember(hashes, choice.decode)
        decode = pods[choice.decode]
        started = time.monotonic()
        router.inflight[decode.pod_name] += 1
        status = 502
        try:
            url = f"http://{decode.ip}:{decode.port}{path}"
            async with self._session.post(url, json=decode_body, headers=_forwarded(request)) as upstream:
                status = upstream.status
                if upstream.status != 200:
                    await self._upstream_error(upstream, "decode_error", decode.pod_name)
                if body.get("stream"):
                    response = web.StreamResponse(
                        headers={"Content-Type": upstream.headers.get("Content-Type", "text/event-stream")}
                    )
                    await response.prepare(request)
                    holder["response"] = response
                    async for chunk in upstream.content.iter_any():
                        await response.write(chunk)
                    await response.write_eof()
                    return response
                data = await upstream.read()
                return web.Response(body=data, status=200, content_type=upstream.content_type)
        except aiohttp.ClientError as exc:
            if "response" in holder:
                return holder["response"]
            raise RouteError(
                502, "decode_error", f"decode pod {decode.pod_name} failed: {exc}", decode.pod_name
            ) from None
        finally:
            router.inflight[decode.pod_name] -= 1
            router.stats.phase("decode", path, status, time.monotonic() - started)

    async def _prefill(
        self, router: Router, prefill: Endpoint, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> dict[str, Any] | None:
        assert self._session is not None
        request_body = {k: v for k, v in body.items() if k not in ("stream_options", "max_completion_tokens")}
        request_body.update(
            {
                "max_tokens": 1,
                "stream": False,
                "kv_transfer_params": {"do_remote_decode": True, "do_remote_prefill": False},
            }
        )
        started = time.monotonic()
        router.inflight[prefill.pod_name] += 1
        status = 502
        try:
            async with self._session.post(
                f"http://{prefill.ip}:{prefill.port}{path}", json=request_body, headers=headers
            ) as upstream:
                status = upstream.status
                if upstream.status != 200:
                    await self._upstream_error(upstream, "prefill_error", prefill.pod_name)
                try:
                    data = await upstream.json(content_type=None)
                except (json.JSONDecodeError, ValueError):
                    raise RouteError(
                        502,
                        "prefill_error",
                        f"prefill pod {prefill.pod_name} answered a non-JSON body",
                        prefill.pod_name,
                    ) from None
        except aiohttp.ClientError as exc:
            raise RouteError(
                502, "prefill_error", f"prefill pod {prefill.pod_name} failed: {exc}", prefill.pod_name
            ) from None
        finally:
            router.inflight[prefill.pod_name] -= 1
            router.stats.phase("prefill", path, status, time.monotonic() - started)
        kv = data.get("kv_transfer_params") if isinstance(data, dict) else None
        # A connector that hands KV over by prompt (vLLM's ExampleConnector, LMCache) returns none: the
        # decode gets the request as it came, as vLLM's own proxy and vllm-router send it.
        return kv if isinstance(kv, dict) else None

    @staticmethod
    async def _upstream_error(upstream: aiohttp.ClientResponse, error_type: str, pod: str) -> None:
        data = await upstream.read()
        if upstream.status in (400, 401, 403, 404, 422, 429):
            raise Passthrough(
                upstream.status, data, upstream.content_type, upstream.headers.get("Retry-After")
            )
        raise RouteError(502, error_type, f"{pod} answered HTTP {upstream.status}", pod)
