"""The bulkhead: at most GATEWAY_CLUSTER_MAX_WAITING requests wait for one cluster's first byte.

Against real servers over TCP (test_fallback_faults' scripted upstreams: a cluster that holds its
requests or answers too late, a fallback), through the gateway's own dispatch and through a running
gateway (uvicorn). A request the bulkhead turns away goes to the fallback at once (or gets the 503
naming the cap), is not a failure for the circuit breaker, and never takes its half-open trial.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from gateway import failover
from gateway.bulkhead import bulkhead_for
from gateway.routes import RouteEntry
from gateway.tests.conftest import FALLBACK_MODEL, MODEL
from gateway.tests.test_fallback_faults import Servers, ask, route

WAIT = 5.0  # the first-byte timeout of a route whose cluster holds its requests


@pytest.fixture(scope="module")
def upstreams() -> Iterator[Servers]:
    running = Servers()
    running.start()
    yield running
    running.stop()


@pytest.fixture
def held(upstreams: Servers) -> Iterator[Servers]:
    """The servers with empty scripts and closed gates; the gates open at the end (nothing stays held)."""
    for server in (upstreams.cluster, upstreams.fallback):
        server.script.clear()
        server.gate = asyncio.Event()
    yield upstreams

    async def release() -> None:
        from gateway.recorder import recorder

        upstreams.cluster.gate.set()
        upstreams.fallback.gate.set()
        recorder().breakers.clear()  # these made-up topologies' breaker changes are not written

    upstreams.run(release())


def holding(servers: Servers, *, fallback: bool = True, failures: int = 1) -> RouteEntry:
    return dataclasses.replace(route(servers, fallback=fallback, failures=failures), timeout=WAIT)


async def until(check: Callable[[], bool], what: str, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        await asyncio.sleep(0.01)


def test_a_full_cluster_sends_the_next_requests_to_the_fallback_at_once_and_counts_no_failure(held, settings):
    settings.GATEWAY_CLUSTER_MAX_WAITING = 2
    entry = holding(held, failures=1)  # one failure counted would open the breaker
    held.cluster.script.extend(["hold"] * 7)  # the cluster stops answering
    hits = held.cluster.hits

    async def scenario() -> tuple[list[Any], list[Any], float]:
        waiting = [asyncio.ensure_future(ask(entry)) for _ in range(2)]
        await until(lambda: held.cluster.hits == hits + 2, "two requests waiting at the cluster")
        started = time.monotonic()
        others = await asyncio.gather(*(ask(entry) for _ in range(5)))
        took = time.monotonic() - started
        assert bulkhead_for(entry.endpoint).waiting == 2
        held.cluster.gate.set()  # the cluster answers again
        return list(await asyncio.gather(*waiting)), list(others), took

    first, others, took = held.run(scenario())
    assert [(a[0], a[1]) for a in others] == [(200, "fallback")] * 5, others[0][2][:300]
    assert took < WAIT / 2, f"the fallback's answers took {took:.2f} s: they waited on the cluster"
    assert held.cluster.hits == hits + 2  # the five never reached the cluster
    assert [(a[0], a[1]) for a in first] == [(200, "cluster")] * 2
    breaker = failover.breaker_for(entry)
    assert (breaker.state, breaker.failures) == ("closed", 0), breaker.last_reason
    assert bulkhead_for(entry.endpoint).waiting == 0


def test_requests_that_waited_out_the_timeout_count_once_each_and_the_turned_away_not_at_all(held, settings):
    settings.GATEWAY_CLUSTER_MAX_WAITING = 2
    entry = dataclasses.replace(route(held, failures=3), timeout=0.4)  # "slow": no head within 0.4 s
    held.cluster.script.extend(["slow"] * 6)

    async def scenario() -> list[Any]:
        hits = held.cluster.hits
        waiting = [asyncio.ensure_future(ask(entry)) for _ in range(2)]
        await until(lambda: held.cluster.hits == hits + 2, "two requests waiting at the cluster")
        others = await asyncio.gather(*(ask(entry) for _ in range(4)))
        return [*(await asyncio.gather(*waiting)), *others]

    answers = held.run(scenario())
    assert [a[1] for a in answers] == ["fallback"] * 6  # every one served, by the fallback
    breaker = failover.breaker_for(entry)
    assert (breaker.state, breaker.failures) == ("closed", 2), breaker.last_reason
    assert "within 0.4 s" in breaker.last_reason  # the timeout as set, not rounded to "0 s"


def test_without_a_fallback_a_turned_away_request_gets_the_503_naming_the_cap(held, settings):
    settings.GATEWAY_CLUSTER_MAX_WAITING = 1
    entry = holding(held, fallback=False)
    held.cluster.script.extend(["hold", "hold"])

    async def scenario() -> tuple[Any, Any]:
        hits = held.cluster.hits
        waiting = asyncio.ensure_future(ask(entry))
        await until(lambda: held.cluster.hits == hits + 1, "a request waiting at the cluster")
        refused = await ask(entry)
        held.cluster.gate.set()
        return refused, await waiting

    (status, code, message, _), served = held.run(scenario())
    assert (status, code) == (503, "cluster_unavailable"), message
    assert b"already has 1 requests waiting for its first byte" in message
    assert b"GATEWAY_CLUSTER_MAX_WAITING=1" in message
    assert served[:2] == (200, "cluster")
    assert failover.breaker_for(entry).state == "closed"


def test_a_turned_away_request_does_not_take_the_half_open_trial(held, settings):
    """Two topologies behind one router share its bulkhead; one's breaker is due for its trial while
    the other's requests fill the router: the trial waits for room, it is not spent on a turned-away
    request (which would leave the breaker half-open with a trial that never went anywhere)."""
    settings.GATEWAY_CLUSTER_MAX_WAITING = 2
    due, other = holding(held, failures=2), holding(held)
    held.cluster.script.extend(["500", "500"])
    for _ in range(2):
        assert held.run(ask(due))[1] == "fallback"
    breaker = failover.breaker_for(due)
    assert breaker.state == "open"
    time.sleep(due.breaker_open_seconds + 0.05)  # the trial is due
    held.cluster.script.extend(["hold", "hold"])

    async def scenario() -> tuple[Any, Any]:
        hits = held.cluster.hits
        waiting = [asyncio.ensure_future(ask(other)) for _ in range(2)]
        await until(lambda: held.cluster.hits == hits + 2, "the other topology filling the router")
        turned = await ask(due)
        assert (breaker.state, breaker.trial_in_flight) == ("open", False)
        held.cluster.gate.set()
        await asyncio.gather(*waiting)
        return turned, await ask(due)

    turned, trial = held.run(scenario())
    assert turned[:2] == (200, "fallback")
    assert trial[:2] == (200, "cluster")  # the trial went to the cluster once there was room
    assert breaker.state == "closed"


def test_a_running_gateway_turns_the_requests_over_the_cap_to_the_fallback_and_records_them(
    held, make_topology, inference_key, admin_user, tmp_path
):
    import requests

    from gateway.models import BreakerEvent, GatewayRequest
    from gateway.services import route_update
    from gateway.tests.conftest import running_gateway
    from tests.support import wait_until

    upstreams = held
    cluster = upstreams.cluster
    cluster.script.extend(["hold"] * 10)
    topology = make_topology()
    changes = {
        "endpoint_url": upstreams.urls["cluster"],
        "fallback_base_url": upstreams.urls["fallback"] + "/v1",
        "fallback_model": FALLBACK_MODEL,
        "timeout_seconds": 20,
        "breaker_failures": 1,  # a turned-away request counted as a failure would open it
    }
    route_update(topology=topology, changes=changes, actor=admin_user)
    issued = inference_key()
    auth = {"Authorization": f"Bearer {issued.secret}"}
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}

    def post(base: str) -> tuple[int, str, float]:
        started = time.monotonic()
        answer = requests.post(f"{base}/v1/chat/completions", json=body, headers=auth, timeout=15)
        backend = answer.headers.get("x-tandem-backend", answer.text[:200])
        return answer.status_code, backend, time.monotonic() - started

    log = tmp_path / "gateway.log"
    try:
        with running_gateway(log, GATEWAY_CLUSTER_MAX_WAITING="3") as base, ThreadPoolExecutor(8) as pool:
            hits = cluster.hits
            waiting = [pool.submit(post, base) for _ in range(3)]
            wait_until(lambda: cluster.hits == hits + 3, 10, "three requests waiting at the cluster")
            over = [pool.submit(post, base) for _ in range(4)]
            turned = [future.result(timeout=10) for future in over]
            assert cluster.hits == hits + 3
            upstreams.loop.call_soon_threadsafe(cluster.gate.set)
            served = [future.result(timeout=10) for future in waiting]
            after = post(base)
    finally:
        upstreams.loop.call_soon_threadsafe(cluster.gate.set)
    assert [t[:2] for t in turned] == [(200, "fallback")] * 4, log.read_text()[-2000:]
    assert max(t[2] for t in turned) < 5, turned  # at once, not after the 20 s timeout
    assert [s[:2] for s in served] == [(200, "cluster")] * 3
    assert after[:2] == (200, "cluster")  # the breaker stayed closed
    assert not BreakerEvent.objects.filter(topology=topology).exists()
    wait_until(lambda: GatewayRequest.objects.filter(key_id=issued.key.pk).count() == 8, 10, "the records")
    backends = GatewayRequest.objects.filter(key_id=issued.key.pk).values_list("backend", "status")
    assert sorted(backends) == [("cluster", 200)] * 4 + [("fallback", 200)] * 4
    text = log.read_text()
    assert "is full: 3 requests wait for its first byte (GATEWAY_CLUSTER_MAX_WAITING)" in text, text[-2000:]
