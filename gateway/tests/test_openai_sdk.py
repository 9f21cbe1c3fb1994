"""The official openai SDK against the gateway in front of a simulated P/D topology."""

from __future__ import annotations

import time

import openai
import pytest
import requests

from gateway.services import route_update
from gateway.tests.conftest import FALLBACK_MODEL, MODEL


def client(gw, secret=None):
    return openai.OpenAI(base_url=f"{gw.base}/v1", api_key=secret or gw.secret, max_retries=0, timeout=30)


def test_chat_completion_through_the_cluster(gateway):
    raw = client(gateway).chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "Hello there"}], max_tokens=8
    )
    assert raw.headers["x-tandem-backend"] == "cluster"
    reply = raw.parse()
    assert reply.choices[0].message.content
    assert reply.usage.completion_tokens > 0


def test_streaming_passes_chunks_and_hides_the_usage_chunk_it_added(gateway):
    stream = client(gateway).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Count"}], max_tokens=6, stream=True
    )
    chunks = list(stream)
    assert all(chunk.choices for chunk in chunks), "a usage-only chunk the client did not ask for leaked"
    assert "".join(c.choices[0].delta.content or "" for c in chunks)


def test_streaming_with_include_usage_gets_usage(gateway):
    stream = client(gateway).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Count"}],
        max_tokens=6,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_completions_and_aliases(gateway):
    reply = client(gateway).completions.create(model="qwen", prompt="Once upon", max_tokens=5)
    assert reply.choices[0].text


def test_models_lists_what_the_key_may_call(gateway):
    ids = [m.id for m in client(gateway).models.list()]
    assert MODEL in ids and "qwen" in ids


def test_unknown_model_says_which_exist(gateway):
    with pytest.raises(openai.NotFoundError) as caught:
        client(gateway).chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
    assert "Models for this key" in caught.value.message and MODEL in caught.value.message


def test_allow_list_is_checked_on_the_model_dispatched(gateway, inference_key):
    other = inference_key(name="narrow", allowed_models=["some-other-model"])
    with pytest.raises(openai.PermissionDeniedError) as caught:
        client(gateway, other.secret).chat.completions.create(
            model="qwen", messages=[{"role": "user", "content": "x"}]
        )
    assert MODEL in caught.value.message


def test_bad_keys_get_openai_errors_without_revealing_anything(gateway, inference_key):
    from keys import tokens

    with pytest.raises(openai.AuthenticationError) as caught:
        client(gateway, tokens.generate("inference")).models.list()
    assert caught.value.code == "key_unknown"
    broken = gateway.secret[:-1] + ("A" if gateway.secret[-1] != "A" else "B")
    with pytest.raises(openai.AuthenticationError) as caught:
        client(gateway, broken).models.list()
    assert caught.value.code == "token_checksum"


def test_a_management_key_is_told_to_use_an_inference_key(gateway, admin_user):
    from keys import services

    management = services.key_create(actor=admin_user, name="ci", purpose="automation")
    with pytest.raises(openai.AuthenticationError) as caught:
        client(gateway, management.secret).models.list()
    assert caught.value.code == "wrong_kind"


def test_rate_limit_gives_429_with_retry_after(gateway, inference_key):
    limited = inference_key(name="tight", limits_given={"requests_per_minute": 2})
    c = client(gateway, limited.secret)
    c.models.list()
    c.models.list()
    with pytest.raises(openai.RateLimitError) as caught:
        c.models.list()
    retry_after = int(caught.value.response.headers["retry-after"])
    assert retry_after >= 1
    assert "requests per minute" in caught.value.message
    limit = caught.value.body["limit"]  # the SDK keeps the whole `error` object
    assert limit["name"] == "requests_per_minute" and limit["value"] == 2 and limit["used"] == 2
    assert limit["retry_after"] == retry_after and limit["resets_at"].endswith(":00Z")


def test_token_quota_counts_usage_and_refuses_when_spent(gateway, inference_key):
    """Tokens are reserved at admission (prompt estimate + `max_tokens`) and settled after: what the
    first request used stays charged, so a second whose reservation no longer fits is refused."""
    spender = inference_key(name="spender", limits_given={"tokens_per_day": 60})
    c = client(gateway, spender.secret)
    c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello"}], max_tokens=8)
    with pytest.raises(openai.RateLimitError) as caught:
        c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello"}], max_tokens=8)
    assert caught.value.code == "insufficient_quota"
    assert "tokens per day" in caught.value.message and "reserved tokens" in caught.value.message
    limit = caught.value.body["limit"]
    assert limit["name"] == "tokens_per_day" and limit["value"] == 60
    assert 0 < limit["used"] < 60  # settled at what the first request used, not its reservation
    assert limit["resets_at"].endswith("T00:00:00Z")
    assert limit["retry_after"] == int(caught.value.response.headers["retry-after"])


def test_a_request_that_could_never_fit_the_token_limit_is_a_400_naming_max_tokens(gateway, inference_key):
    small = inference_key(name="small", limits_given={"tokens_per_day": 5})
    with pytest.raises(openai.BadRequestError) as caught:
        client(gateway, small.secret).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hello"}], max_tokens=8
        )
    assert caught.value.code == "max_tokens_over_limit" and "lower `max_tokens`" in caught.value.message


def test_requests_are_recorded_in_batches(gateway):
    from gateway.models import GatewayRequest

    client(gateway).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    deadline = time.monotonic() + 10
    while (
        time.monotonic() < deadline and not GatewayRequest.objects.filter(topology=gateway.topology).exists()
    ):
        time.sleep(0.2)
    row = GatewayRequest.objects.get(topology=gateway.topology)
    assert row.backend == "cluster" and row.status == 200 and row.completion_tokens > 0
    assert str(row.key_id) == str(gateway.key.pk) and not row.probe
    assert not row.stream and row.ttft_ms is None and row.latency_ms > 0  # a whole answer: no TTFT
    from gateway.prefixgroup import prefix_group

    assert row.prefix_group == prefix_group({"messages": [{"role": "user", "content": "Hi"}]})


def test_cluster_down_without_fallback_is_a_clear_503(gateway):
    from tests.support import closed_port

    gateway.route(endpoint_url=f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(openai.InternalServerError) as caught:
        client(gateway).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 503
    assert "no fallback" in caught.value.message


def test_fallback_serves_when_the_cluster_is_down_and_the_breaker_opens_then_closes(
    gateway, fallback_stack, cluster_stack
):
    from gateway.models import BreakerEvent
    from tests.support import closed_port

    gateway.route(
        endpoint_url=f"http://127.0.0.1:{closed_port()}",
        fallback_base_url=f"{fallback_stack.url}/v1",
        fallback_model=FALLBACK_MODEL,
        fallback_api_key="sk-upstream-secret",
        breaker_failures=2,
        breaker_open_seconds=2,
    )
    c = client(gateway)
    backends = []
    for _ in range(4):
        raw = c.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=4
        )
        backends.append(raw.headers["x-tandem-backend"])
        assert raw.parse().choices[0].message.content
    assert backends == ["fallback"] * 4
    deadline = time.monotonic() + 10
    while (
        time.monotonic() < deadline
        and not BreakerEvent.objects.filter(topology=gateway.topology, state="open").exists()
    ):
        time.sleep(0.2)
    assert BreakerEvent.objects.filter(topology=gateway.topology, state="open").exists()
    gateway.route(endpoint_url=cluster_stack.url)
    time.sleep(2.2)
    raw = c.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=4
    )
    assert raw.headers["x-tandem-backend"] == "cluster"
    deadline = time.monotonic() + 10
    while (
        time.monotonic() < deadline
        and not BreakerEvent.objects.filter(topology=gateway.topology, state="closed").exists()
    ):
        time.sleep(0.2)
    assert BreakerEvent.objects.filter(topology=gateway.topology, state="closed").exists()


def test_body_limits_and_bad_json(gateway):
    headers = {"Authorization": f"Bearer {gateway.secret}", "Content-Type": "application/json"}
    bad = requests.post(f"{gateway.base}/v1/chat/completions", data=b"{nope", headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json"
    deep = requests.post(
        f"{gateway.base}/v1/chat/completions", data=b"[" * 5000 + b"]" * 5000, headers=headers
    )
    assert deep.status_code == 400
    missing = requests.post(f"{gateway.base}/v1/chat/completions", json={"messages": []}, headers=headers)
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "model"
    nowhere = requests.get(f"{gateway.base}/v1/embeddings", headers=headers)
    assert nowhere.status_code == 404


def test_killing_the_router_falls_back_and_the_breaker_closes_when_it_returns(
    make_topology, inference_key, admin_user, fallback_stack, tmp_path
):
    """The cluster's router process stops: traffic moves to the fallback upstream, which the answers
    say; the breaker opens; once the router is back on its address, the cluster serves again."""
    from gateway.models import BreakerEvent
    from gateway.tests.conftest import Gateway, StackThread, running_gateway
    from sandbox.router.farm import RouterSpec

    with StackThread(MODEL) as stack:
        topology = make_topology()
        route_update(
            topology=topology,
            changes={
                "endpoint_url": stack.url,
                "fallback_base_url": f"{fallback_stack.url}/v1",
                "fallback_model": FALLBACK_MODEL,
                "breaker_failures": 2,
                "breaker_open_seconds": 2,
            },
            actor=admin_user,
        )
        issued = inference_key(name="kill")
        with running_gateway(tmp_path / "gw.log") as base:
            gw = Gateway(
                base=base, topology=topology, secret=issued.secret, key=issued.key, log=tmp_path / "gw.log"
            )
            c = client(gw)

            def backend() -> str:
                raw = c.chat.completions.with_raw_response.create(
                    model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=4
                )
                assert raw.parse().choices[0].message.content
                return raw.headers["x-tandem-backend"]

            assert backend() == "cluster"
            ip, port = stack.stack.routers.address("sim/router")
            stack.run(stack.stack.routers.stop("sim/router"))
            assert [backend() for _ in range(3)] == ["fallback"] * 3
            spec = RouterSpec(MODEL, 30.0, 2, 0.01)
            stack.run(stack.stack.routers.start("sim/router", ip, port, spec, stack.stack.endpoints))
            time.sleep(2.2)
            assert backend() == "cluster"
    deadline = time.monotonic() + 10
    states: list[str] = []
    while time.monotonic() < deadline:
        states = list(
            BreakerEvent.objects.filter(topology=topology).order_by("created").values_list("state", flat=True)
        )
        if "closed" in states:
            break
        time.sleep(0.2)
    assert states[:1] == ["open"] and "closed" in states, states
