"""Concurrent scraping of engine ``/metrics`` (and Tandem's link probes) with aiohttp.

Each worker process keeps ONE asyncio loop (in a daemon thread) and ONE ``aiohttp.ClientSession``
with keep-alive connections, created lazily and re-created after a fork, so consecutive collections
reuse connections. The loop is uvloop's when it is installed (it comes with ``uvicorn[standard]``).
Every pod has its own timeout; all pods are fetched at once, so one slow or dead
pod costs at most its own timeout and never delays the others' data. Responses are parsed as they
arrive. Link probes run on the same loop but apart: a collection starts them and does not wait for
them (a probe is real inference through a pair, which takes as long as the engines take).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace

import aiohttp
from yarl import URL

from controlplane.loopthread import LoopThread
from telemetry.assemble import PodResult, PodTarget
from telemetry.parse import LineParser, RawSample
from telemetry.probe import ProbeResult, ProbeTarget, probe_all
from telemetry.sources import DIRECT, PrometheusSource, Transport, prometheus_results
from telemetry.tent import merge_tent, tent_unreachable

MAX_CONNECTIONS = 512
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_PARSERS = 20_000  # per-target line memories kept by one process


@dataclass(frozen=True)
class ScrapeRequest:
    target: PodTarget


def _describe(exc: BaseException, url: str, timeout_s: float) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return f"no answer from {url} within {timeout_s:.1f} s"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect to {url}: {exc.os_error.strerror or exc.os_error}"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"{url} answered HTTP {exc.status}"
    if isinstance(exc, aiohttp.ClientError):
        return f"{url}: {exc.__class__.__name__} {exc}".strip()
    if isinstance(exc, ValueError):
        return f"{url} is not Prometheus text format ({exc})"
    return f"{url}: {exc.__class__.__name__}"


_timeouts: dict[float, aiohttp.ClientTimeout] = {}


async def _get_text(
    session: aiohttp.ClientSession, url: str, timeout_s: float, transport: Transport = DIRECT
) -> tuple[int, str]:
    timeout = _timeouts.get(timeout_s)
    if timeout is None:
        # connect and whole-answer deadlines: a pod that accepts and then stalls costs at most timeout_s
        timeout = _timeouts[timeout_s] = aiohttp.ClientTimeout(
            total=timeout_s, sock_connect=timeout_s, sock_read=timeout_s
        )
    async with session.get(
        URL(url, encoded=True), timeout=timeout, headers=transport.headers, ssl=transport.ssl
    ) as response:
        body = await response.content.read(MAX_BODY_BYTES)
        return response.status, body.decode("utf-8", errors="replace")


async def _scrape_tent(
    session: aiohttp.ClientSession,
    target: PodTarget,
    *,
    timeout_s: float,
    parser: LineParser | None,
    transport: Transport,
) -> tuple[RawSample | None, str | None]:
    """The transfer engine's own ``/metrics`` of the pod (TENT's port): its samples, or why not."""
    assert target.tent_port is not None
    url = transport.url(replace(target, port=target.tent_port), "metrics")
    try:
        status, text = await _get_text(session, url, timeout_s, transport)
        if status != 200:
            return None, tent_unreachable(target.tent_port, transport.failure(status, text, url))
        return (parser or LineParser()).parse(text, ts=time.time()), None
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        return None, tent_unreachable(target.tent_port, transport.prefix + _describe(exc, url, timeout_s))


async def scrape_pod(
    session: aiohttp.ClientSession,
    request: ScrapeRequest,
    *,
    timeout_s: float,
    parser: LineParser | None = None,
    transport: Transport = DIRECT,
    tent_parser: LineParser | None = None,
) -> PodResult:
    """One pod's ``/metrics`` over ``transport``: directly, or through the API server; with its
    transfer engine's (TENT's port) read at the same time and merged into the pod's samples."""
    target = request.target
    if target.tent_port is None:
        return await _scrape_engine(session, target, timeout_s=timeout_s, parser=parser, transport=transport)
    result, (tent, tent_error) = await asyncio.gather(
        _scrape_engine(session, target, timeout_s=timeout_s, parser=parser, transport=transport),
        _scrape_tent(session, target, timeout_s=timeout_s, parser=tent_parser, transport=transport),
    )
    result.tent_error = tent_error
    if result.raw is not None and tent is not None:
        result.raw = merge_tent(result.raw, tent)
    return result


async def _scrape_engine(
    session: aiohttp.ClientSession,
    target: PodTarget,
    *,
    timeout_s: float,
    parser: LineParser | None,
    transport: Transport,
) -> PodResult:
    result = PodResult(target=target)
    url = transport.url(target, "metrics")
    try:
        status, text = await _get_text(session, url, timeout_s, transport)
        if status != 200:
            result.error = transport.failure(status, text, url)
            return result
        result.raw = (parser or LineParser()).parse(text, ts=time.time())
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        result.error = transport.prefix + _describe(exc, url, timeout_s)
    return result


async def scrape_all(
    session: aiohttp.ClientSession,
    requests: Sequence[ScrapeRequest],
    *,
    timeout_s: float,
    parsers: dict[str, LineParser] | None = None,
    transport: Transport = DIRECT,
) -> list[PodResult]:
    """Scrape every pod at once. ``parsers`` (per ``ip:port``) lets unchanged lines skip parsing."""
    if parsers is not None and len(parsers) > MAX_PARSERS:
        parsers.clear()

    def parser_for(target: PodTarget, port: int | None = None) -> LineParser | None:
        if parsers is None:
            return None
        return parsers.setdefault(f"{target.ip}:{port or target.port}", LineParser())

    tasks = [
        asyncio.ensure_future(
            scrape_pod(
                session,
                r,
                timeout_s=timeout_s,
                parser=parser_for(r.target),
                transport=transport,
                tent_parser=parser_for(r.target, r.target.tent_port) if r.target.tent_port else None,
            )
        )
        for r in requests
    ]
    # Each request has its own timeout; this deadline also bounds parsing on an overloaded worker.
    _, late = await asyncio.wait(tasks, timeout=timeout_s * 1.25 + 0.5)
    for task in late:
        task.cancel()
    results = []
    for request, task in zip(requests, tasks, strict=True):
        if task in late:
            url = transport.url(request.target, "metrics")
            error = f"{transport.prefix}no answer from {url} within {timeout_s:.1f} s (collection deadline)"
            results.append(PodResult(target=request.target, error=error))
        else:
            results.append(task.result())
    return results


# Direct: a few keep-alive connections per pod. Through one host (the API server's proxy, a
# Prometheus server) every pod's request shares that host's connections, so it gets more of them.
PER_HOST = {"direct": 4, "proxy": 64, "prometheus": 4}


def new_session(limit_per_host: int = 4) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(
        limit=MAX_CONNECTIONS, limit_per_host=limit_per_host, keepalive_timeout=60
    )
    return aiohttp.ClientSession(
        connector=connector,
        headers={"Accept": "text/plain"},
        cookie_jar=aiohttp.DummyCookieJar(),  # engines set no cookies; skip the jar on every request
        auto_decompress=False,
        skip_auto_headers=("Accept-Encoding",),
    )


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when installed (it comes with ``uvicorn[standard]``): less CPU per request."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - the stdlib loop works, only slower
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class Scraper:
    """The per-process scraping loop and session (thread-safe; fork-aware)."""

    def __init__(self, *, line_memory: bool = True) -> None:
        self._line_memory = line_memory
        self._lock = threading.Lock()
        self._thread = LoopThread("telemetry-scraper", new_loop=new_loop, on_start=self._forget_loop_state)
        self._sessions: dict[str, aiohttp.ClientSession] = {}  # per source kind; loop thread only
        self._parsers: dict[str, LineParser] = {}  # used on the loop thread only
        self._probing: dict[str, Future[list[ProbeResult]]] = {}  # probes under way, per topology

    def _forget_loop_state(self) -> None:
        """A new loop (first use, or a forked child): sessions and probes of the old one are gone."""
        self._sessions, self._parsers = {}, {}
        with self._lock:
            self._probing = {}

    def _session_for(self, kind: str) -> aiohttp.ClientSession:
        session = self._sessions.get(kind)
        if session is None or session.closed:
            session = self._sessions[kind] = new_session(PER_HOST.get(kind, 4))
        return session

    async def _run(
        self, requests: Sequence[ScrapeRequest], timeout_s: float, transport: Transport
    ) -> list[PodResult]:
        parsers = self._parsers if self._line_memory else None
        return await scrape_all(
            self._session_for(transport.kind),
            requests,
            timeout_s=timeout_s,
            parsers=parsers,
            transport=transport,
        )

    async def _query(
        self, source: PrometheusSource, namespace: str, targets: Sequence[PodTarget], timeout_s: float
    ) -> list[PodResult]:
        parsers = self._parsers if self._line_memory else None
        return await prometheus_results(
            self._session_for("prometheus"), source, namespace, targets, timeout_s=timeout_s, parsers=parsers
        )

    def scrape(
        self, requests: Sequence[ScrapeRequest], *, timeout_s: float, transport: Transport = DIRECT
    ) -> list[PodResult]:
        """Each pod's own endpoints, directly or through the API server's pods proxy."""
        if not requests:
            return []
        return self._thread.run(self._run(requests, timeout_s, transport), timeout=timeout_s * 1.25 + 5)

    async def _probe(
        self, probes: list[ProbeTarget], timeout_s: float, transport: Transport
    ) -> list[ProbeResult]:
        return await probe_all(
            self._session_for(transport.kind),
            probes,
            timeout_s=timeout_s,
            headers=transport.headers,
            ssl=transport.ssl,
        )

    def probe(
        self, key: str, probes: list[ProbeTarget], *, timeout_s: float, transport: Transport = DIRECT
    ) -> Future[list[ProbeResult]] | None:
        """Start the link probes of ``key`` (a topology) on the loop and return at once; None when there
        is nothing to probe or this process's previous probes of ``key`` are still under way (a slow
        pair never piles probes up). The metrics never wait for a probe: the caller takes its results
        when they are ready (``telemetry.linkinputs.gather_probes``)."""
        if not probes:
            return None
        with self._lock:
            running = self._probing.get(key)
            if running is not None and not running.done():
                return None
        future = self._thread.submit(self._probe(probes, timeout_s, transport))
        with self._lock:
            self._probing[key] = future
        return future

    def query(
        self, source: PrometheusSource, namespace: str, targets: Sequence[PodTarget], *, timeout_s: float
    ) -> list[PodResult]:
        """The pods' latest samples from a Prometheus server (one PromQL query for all of them)."""
        if not targets:
            return []
        return self._thread.run(
            self._query(source, namespace, targets, timeout_s), timeout=timeout_s * 1.25 + 5
        )

    def close(self) -> None:
        loop = self._thread.current()
        sessions, self._sessions = list(self._sessions.values()), {}
        if loop is None:
            return
        for session in sessions:
            asyncio.run_coroutine_threadsafe(session.close(), loop).result(timeout=5)
        self._thread.stop()


_scraper = Scraper()
atexit.register(_scraper.close)


def scraper() -> Scraper:
    return _scraper
