"""Fallback and circuit breaker against real servers that fail the ways engines and proxies fail.

One event loop in a thread holds, for the whole module, two scripted upstreams (tests.scripted_upstream
with faults played in order: a 5xx, a 429, nginx's HTML 502 page, an HTML page with status 200, no
answer in time, a stream that stalls before or after its first byte, a request held until released)
and the gateway's own dispatch, which reaches them over TCP with its pooled client. The last test
drives a running gateway (uvicorn) for the API's error shape and the record.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from gateway import dispatch, failover
from gateway.errors import GatewayError
from gateway.outcome import Outcome
from gateway.routes import Fallback, RouteEntry
from gateway.tests.conftest import FALLBACK_MODEL, MODEL
from tests.scripted_upstream import Upstream

# nginx's own 502 page (src/http/ngx_http_special_response.c: ngx_http_error_502_page + the tail).
NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)
TIMEOUT = 0.4  # the route's first-byte timeout in these tests
STALL = 1.2  # how long a stalled upstream keeps quiet


class Faulty(Upstream):
    """The scripted upstream, playing `script`'s faults one request each, then answering normally."""

    def __init__(self, model: str) -> None:
        super().__init__(model=model)
        self.script: list[str] = []
        self.hits = 0
        self.gate = asyncio.Event()

    async def chat(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.hits += 1
        fault = self.script.pop(0) if self.script else "ok"
        if fault == "500":
            return web.json_response({"error": {"message": "engine failed", "code": 500}}, status=500)
        if fault == "429":
            return web.json_response({"error": {"message": "busy"}}, status=429, headers={"retry-after": "1"})
        if fault == "html502":
            return web.Response(status=502, text=NGINX_502, content_type="text/html")
        if fault == "html200":
            return web.Response(
                status=200, text="<html><body>Welcome</body></html>", content_type="text/html"
            )
        if fault == "slow":  # no response head in time
            await asyncio.sleep(STALL)
        if fault in ("stall", "cut"):  # a 200 event stream that says nothing, or says one thing
            response = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await response.prepare(request)
            if fault == "cut":
                await response.write(b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n')
            await asyncio.sleep(STALL)
            return response
        if fault == "hold":
            await self.gate.wait()
        return await super().chat(request)


class Servers:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runners: list[web.AppRunner] = []
        self.cluster: Faulty
        self.fallback: Faulty
        self.urls: dict[str, str] = {}

    def run(self, coro: Any, timeout: float = 20) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        from tests.support import free_port

        self.thread.start()

        async def serve(upstream: Faulty) -> str:
            runner = web.AppRunner(upstream.app(), access_log=None, shutdown_timeout=0.5)
            await runner.setup()
            port = free_port()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            self.runners.append(runner)
            return f"http://127.0.0.1:{port}"

        async def both() -> None:
            self.cluster, self.fallback = Faulty(MODEL), Faulty(FALLBACK_MODEL)
            self.urls["cluster"] = await serve(self.cluster)
            self.urls["fallback"] = await serve(self.fallback)

        self.run(both())

    def stop(self) -> None:
        async def down() -> None:
            from gateway import upstream

            for runner in self.runners:
                await runner.cleanup()
            await upstream.session().close()

        self.run(down())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    running = Servers()
    running.start()
    yield running
    running.stop()


@pytest.fixture
def faults(servers: Servers) -> Iterator[Servers]:
    servers.cluster.script.clear()
    servers.cluster.gate = asyncio.Event()
    yield servers
    servers.cluster.gate.set()

    async def forget() -> None:  # breaker changes of these made-up topologies are not written anywhere
        from gateway.recorder import recorder

        recorder().breakers.clear()

    servers.run(forget())


_ids = itertools.count(990_001)


def route(servers: Servers, *, fallback: bool = True, failures: int = 2) -> RouteEntry:
    return RouteEntry(
        topology_id=next(_ids),
        topology_name="faulty",
        model=MODEL,
        names=(MODEL,),
        endpoint=servers.urls["cluster"],
        fallback=Fallback(servers.urls["fallback"] + "/v1", "", FALLBACK_MODEL, on_429=True)
        if fallback
        else None,
        timeout=TIMEOUT,
        breaker_failures=failures,
        breaker_open_seconds=0.3,
    )


async def ask(entry: RouteEntry, *, stream: bool = False) -> tuple[int, str, bytes, Outcome]:
    """(status, x-tandem-backend or the error code, body, outcome) of one chat request via dispatch."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    request: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
    }
    outcome = Outcome(model=MODEL, entry=entry)
    try:
        await dispatch.serve("/v1/chat/completions", request, entry, send, outcome)
    except GatewayError as error:
        return error.status, error.code, error.message.encode(), outcome
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], headers["x-tandem-backend"], body, outcome


@pytest.mark.parametrize(
    ("fault", "stream"),
    [
        ("500", False),
        ("429", False),
        ("html502", False),
        ("html200", False),
        ("slow", False),
        ("stall", True),
    ],
)
def test_a_failing_cluster_answer_goes_to_the_fallback_and_counts_against_the_breaker(faults, fault, stream):
    entry = route(faults)
    faults.cluster.script.append(fault)
    before = faults.fallback.hits
    status, backend, body, _ = faults.run(ask(entry, stream=stream))
    assert (status, backend) == (200, "fallback"), body[:300]
    assert faults.fallback.hits == before + 1
    assert failover.breaker_for(entry).failures == 1, failover.breaker_for(entry).last_reason
    assert b"chat.completion" in body


def test_without_a_fallback_a_non_json_answer_is_a_502_naming_what_came(faults):
    entry = route(faults, fallback=False, failures=1)
    faults.cluster.script.extend(["html502", "html200"])
    status, code, message, _ = faults.run(ask(entry))
    assert (status, code) == (502, "upstream_invalid_answer")
    assert b"502 with a body that is not JSON (text/html" in message
    assert failover.breaker_for(entry).state == "open"
    entry = route(faults, fallback=False)
    status, code, message, _ = faults.run(ask(entry))
    assert (status, code) == (
        502,
        "upstream_invalid_answer",
    ) and b"200 with a body that is not JSON" in message


def test_never_a_fallback_after_the_first_byte_reached_the_client(faults):
    entry = route(faults)
    faults.cluster.script.append("cut")
    before = faults.fallback.hits

    async def cut() -> tuple[list[dict[str, Any]], BaseException | None]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        request = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
        try:
            await dispatch.serve("/v1/chat/completions", request, entry, send, Outcome(entry=entry))
        except Exception as error:  # the stall after the first byte: the app ends the body
            return sent, error
        return sent, None

    sent, error = faults.run(cut())
    assert sent[0]["status"] == 200 and b"Hi" in sent[1]["body"]
    assert isinstance(error, TimeoutError), error
    assert faults.fallback.hits == before


def open_breaker(faults: Servers, entry: RouteEntry) -> None:
    faults.cluster.script.extend(["500", "500"])
    for _ in range(2):
        assert faults.run(ask(entry))[1] == "fallback"
    assert failover.breaker_for(entry).state == "open"
    time.sleep(0.35)  # breaker_open_seconds


def test_half_open_sends_one_trial_at_a_time_and_its_success_closes_it(faults):
    entry = route(faults)
    open_breaker(faults, entry)
    faults.cluster.script.append("hold")

    async def trial_and_others() -> list[tuple[int, str, bytes, Outcome]]:
        trial = asyncio.ensure_future(ask(entry))
        await asyncio.sleep(0.1)  # the trial is held at the cluster
        hits = faults.cluster.hits
        others = await asyncio.gather(*(ask(entry) for _ in range(3)))
        assert faults.cluster.hits == hits  # the others did not try the cluster
        faults.cluster.gate.set()
        return [await trial, *others]

    answers = faults.run(trial_and_others())
    assert [a[1] for a in answers] == ["cluster", "fallback", "fallback", "fallback"]
    assert failover.breaker_for(entry).state == "closed"


def test_a_trial_whose_client_went_away_lets_the_next_request_try(faults):
    entry = route(faults)
    open_breaker(faults, entry)
    faults.cluster.script.append("hold")

    async def cancelled_trial() -> None:
        trial = asyncio.ensure_future(ask(entry, stream=True))
        await asyncio.sleep(0.1)
        trial.cancel()  # what cancel.until_disconnect does when the client disconnects
        await asyncio.gather(trial, return_exceptions=True)

    faults.run(cancelled_trial())
    assert not failover.breaker_for(entry).trial_in_flight
    status, backend, _, _ = faults.run(ask(entry))
    assert (status, backend) == (200, "cluster") and failover.breaker_for(entry).state == "closed"


def test_a_success_that_started_before_the_breaker_opened_does_not_close_it(faults):
    entry = route(faults)
    faults.cluster.script.extend(["hold", "500", "500"])

    async def slow_then_failures() -> str:
        slow = asyncio.ensure_future(ask(entry))
        await asyncio.sleep(0.1)
        for _ in range(2):
            await ask(entry)
        assert failover.breaker_for(entry).state == "open"
        faults.cluster.gate.set()
        return (await slow)[1]

    assert faults.run(slow_then_failures()) == "cluster"
    assert failover.breaker_for(entry).state == "open"


def test_a_running_gateway_turns_an_html_page_into_a_502_it_records_or_serves_from_the_fallback(
    servers, make_topology, inference_key, admin_user, tmp_path
):
    """Issue 25's "reading choices" error: a proxy's HTML page must not reach an SDK as an answer."""
    import requests

    from gateway.models import BreakerEvent, GatewayRequest
    from gateway.services import route_update
    from gateway.tests.conftest import running_gateway
    from tests.support import wait_until
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    alone = make_topology()
    spec = {**preset_spec("qwen-gpu-nixl"), "name": "with-fallback", "model_name": "proxied-model"}
    backed = topology_create(cluster=alone.cluster, spec=spec, actor=admin_user)
    route_update(
        topology=alone,
        changes={"endpoint_url": servers.urls["cluster"], "breaker_failures": 2},
        actor=admin_user,
    )
    fallback = {"fallback_base_url": servers.urls["fallback"] + "/v1", "fallback_model": FALLBACK_MODEL}
    route_update(
        topology=backed, changes={"endpoint_url": servers.urls["cluster"], **fallback}, actor=admin_user
    )
    issued = inference_key()
    servers.cluster.script[:] = ["html502", "html200", "html502"]
    auth = {"Authorization": f"Bearer {issued.secret}"}

    def ask(base: str, model: str) -> requests.Response:
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4,
        }
        return requests.post(f"{base}/v1/chat/completions", json=body, headers=auth, timeout=10)

    with running_gateway(tmp_path / "gateway.log") as base:
        for answer in (ask(base, MODEL), ask(base, MODEL)):
            assert answer.status_code == 502, answer.text
            error = answer.json()["error"]  # the OpenAI shape the SDKs read
            assert (error["type"], error["code"]) == ("api_error", "upstream_invalid_answer"), error
            assert "not JSON (text/html" in error["message"]
        tried, before = servers.cluster.hits, servers.fallback.hits
        served = ask(base, "proxied-model")
        assert served.status_code == 200 and served.headers["x-tandem-backend"] == "fallback", served.text
        assert served.json()["choices"][0]["message"]["content"]
        assert (servers.cluster.hits, servers.fallback.hits) == (tried + 1, before + 1)
    wait_until(lambda: GatewayRequest.objects.filter(key_id=issued.key.pk).count() == 3, 10, "the records")
    rows = GatewayRequest.objects.filter(key_id=issued.key.pk).order_by("created")
    assert [(r.topology_id, r.status, r.error_code, r.backend) for r in rows] == [
        (alone.pk, 502, "upstream_invalid_answer", "none"),
        (alone.pk, 502, "upstream_invalid_answer", "none"),
        (backed.pk, 200, "", "fallback"),
    ]
    assert BreakerEvent.objects.filter(topology=alone, state="open").exists()
