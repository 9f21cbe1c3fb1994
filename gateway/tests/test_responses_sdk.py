"""The official openai SDK's Responses calls through the gateway: passed through to an engine that serves
/v1/responses (the simulated vLLM), and translated to chat completions for one that does not (a scripted
upstream that calls a tool, then answers)."""

from __future__ import annotations

import json
import time

import openai
import pytest
import requests

from gateway.tests.conftest import FALLBACK_MODEL, MODEL

SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Run a command",
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "array", "items": {"type": "string"}}},
        "required": ["command"],
    },
}


def client(gw, secret=None):
    return openai.OpenAI(base_url=f"{gw.base}/v1", api_key=secret or gw.secret, max_retries=0, timeout=30)


def recorded(gw, count=1):
    from gateway.models import GatewayRequest

    deadline = time.monotonic() + 10
    rows = []
    while time.monotonic() < deadline:
        rows = list(GatewayRequest.objects.filter(topology=gw.topology, endpoint="responses").order_by("id"))
        if len(rows) >= count:
            return rows
        time.sleep(0.2)
    raise AssertionError(f"{len(rows)} responses records, wanted {count}")


def engine_direct(gw, cluster_stack):
    """Route to a vLLM engine itself (it serves /v1/responses; the sandbox's P/D router does not)."""
    gw.route(endpoint_url=cluster_stack.stack.url("decode-0-0"))


def test_passed_through_to_an_engine_that_serves_responses(gateway, cluster_stack):
    engine_direct(gateway, cluster_stack)
    raw = client(gateway).responses.with_raw_response.create(
        model="qwen", input="Hello there", max_output_tokens=8, tools=[SHELL], store=False
    )
    assert raw.headers["x-tandem-responses"] == "passthrough"
    assert raw.headers["x-tandem-backend"] == "cluster"
    response = raw.parse()
    assert response.output_text and response.usage.output_tokens > 0
    row = recorded(gateway)[0]
    assert row.status == 200 and row.completion_tokens == response.usage.output_tokens
    assert row.prompt_tokens == response.usage.input_tokens > 0 and str(row.key_id) == str(gateway.key.pk)


def test_passed_through_stream_ends_with_completed_and_is_counted(gateway, cluster_stack):
    engine_direct(gateway, cluster_stack)
    stream = client(gateway).responses.create(model=MODEL, input="Count", max_output_tokens=6, stream=True)
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and "response.output_text.delta" in kinds
    assert kinds[-1] in ("response.completed", "response.incomplete")
    usage = events[-1].response.usage
    row = recorded(gateway)[0]
    assert row.stream and row.completion_tokens == usage.output_tokens > 0 and row.ttft_ms is not None


def test_a_router_without_responses_gets_it_translated(gateway):
    c = client(gateway)
    for _ in range(2):  # the first finds out (404 from the router), the second knows
        raw = c.responses.with_raw_response.create(model=MODEL, input="Hello", max_output_tokens=6)
        assert (
            raw.headers["x-tandem-responses"] == "translated" and raw.headers["x-tandem-backend"] == "cluster"
        )
        assert raw.parse().output_text
    assert [r.status for r in recorded(gateway, 2)] == [200, 200]


def test_translated_function_call_then_final_text(scripted_gateway):
    gw = scripted_gateway
    c = client(gw)
    raw = c.responses.with_raw_response.create(
        model="gpt-5-codex",
        instructions="You are a coding agent.",
        input=[{"role": "developer", "content": [{"type": "input_text", "text": "Be terse."}]},
               {"role": "user", "content": "run echo"}],
        tools=[SHELL, {"type": "web_search"}],
        tool_choice="auto",
        parallel_tool_calls=False,
        max_output_tokens=64,
        temperature=0.2,
        top_p=0.9,
        reasoning={"effort": "low"},
        include=["reasoning.encrypted_content"],
        prompt_cache_key="thread-1",
        metadata={"ticket": "42"},
        store=False,
    )  # fmt: skip
    assert raw.headers["x-tandem-responses"] == "translated"
    assert raw.headers["x-tandem-dropped-tools"] == "web_search"
    first = raw.parse()
    call = first.output[0]
    assert call.type == "function_call" and call.name == "shell"
    assert json.loads(call.arguments) == {"command": ["echo", "tandem-ok"]}
    assert first.metadata == {"ticket": "42"} and first.prompt_cache_key == "thread-1"
    sent = gw.upstream.requests[-1]
    assert [m["role"] for m in sent["messages"]] == ["system", "system", "user"]
    assert sent["max_tokens"] == 64 and sent["parallel_tool_calls"] is False
    assert sent["reasoning_effort"] == "low" and [t["function"]["name"] for t in sent["tools"]] == ["shell"]
    final = c.responses.create(
        model="gpt-5-codex",
        input=[
            {"role": "user", "content": "run echo"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
            {"type": "function_call", "call_id": call.call_id, "name": "shell", "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "tandem-ok\n"},
        ],
        tools=[SHELL],
        store=False,
    )
    assert final.output_text.strip() == "The command printed tandem-ok."
    sent = gw.upstream.requests[-1]["messages"]
    assert sent[1]["tool_calls"][0]["id"] == call.call_id and sent[2] == {
        "role": "tool", "tool_call_id": call.call_id, "content": "tandem-ok\n"
    }  # fmt: skip
    rows = recorded(gw, 2)
    assert all(r.status == 200 and r.prompt_tokens > 0 and r.completion_tokens == 7 for r in rows)


def test_translated_stream_has_the_full_event_sequence(scripted_gateway):
    c = client(scripted_gateway)
    with c.responses.stream(model="gpt-5-codex", input="run echo", tools=[SHELL]) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_response()
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    call = first.output[0]
    assert call.type == "function_call" and json.loads(call.arguments)["command"] == ["echo", "tandem-ok"]
    assert first.usage.input_tokens > 0 and first.usage.output_tokens == 7
    history = [
        {"role": "user", "content": "run echo"},
        {"type": "function_call", "call_id": call.call_id, "name": "shell", "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "tandem-ok"},
    ]
    with c.responses.stream(model="gpt-5-codex", input=history, tools=[SHELL]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert final.output_text.strip() == "The command printed tandem-ok." and final.status == "completed"
    rows = recorded(scripted_gateway, 2)
    assert all(r.stream and r.completion_tokens == 7 and r.ttft_ms is not None for r in rows)


def test_a_stream_cut_at_max_output_tokens_ends_incomplete(gateway):
    stream = client(gateway).responses.create(model=MODEL, input="Count", max_output_tokens=2, stream=True)
    last = list(stream)[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details.reason == "max_output_tokens"


def test_stored_responses_are_refused_naming_the_field(gateway):
    c = client(gateway)
    with pytest.raises(openai.BadRequestError) as caught:
        c.responses.create(model=MODEL, input="x", store=True)
    assert caught.value.body["param"] == "store" and "store: false" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        c.responses.create(model=MODEL, input="x", previous_response_id="resp_1")
    assert caught.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError) as caught:
        c.responses.retrieve("resp_1")
    assert caught.value.body["code"] == "response_not_stored"


def test_bad_input_is_a_400_naming_the_field(gateway):
    headers = {"Authorization": f"Bearer {gateway.secret}"}
    cases = [
        ({"model": MODEL}, "input"),
        ({"model": MODEL, "input": [{"type": "message", "role": "tool", "content": "x"}]}, "input[0].role"),
        ({"model": MODEL, "input": [{"type": "file_search_call"}]}, "input[0].type"),
        ({"model": MODEL, "input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"model": MODEL, "input": "x", "temperature": 9}, "temperature"),
        ({"model": MODEL, "input": "x", "tool_choice": {"type": "x"}, "tools": [SHELL]}, "tool_choice"),
        ({"model": MODEL, "input": "x", "tools": [{"type": "function"}]}, "tools[0].name"),
    ]
    for body, param in cases:
        answer = requests.post(f"{gateway.base}/v1/responses", json=body, headers=headers, timeout=10)
        assert answer.status_code == 400, (body, answer.text)
        assert answer.json()["error"]["param"] == param, answer.text


def test_keys_scopes_and_limits_apply(gateway, inference_key):
    from keys import tokens

    with pytest.raises(openai.AuthenticationError):
        client(gateway, tokens.generate("inference")).responses.create(model=MODEL, input="x")
    narrow = inference_key(name="narrow", allowed_models=["some-other-model"])
    with pytest.raises(openai.PermissionDeniedError):
        client(gateway, narrow.secret).responses.create(model=MODEL, input="x")
    tight = inference_key(name="tight", limits_given={"tokens_per_day": 50})
    client(gateway, tight.secret).responses.create(model=MODEL, input="Hello", max_output_tokens=8)
    with pytest.raises(openai.RateLimitError) as caught:
        client(gateway, tight.secret).responses.create(model=MODEL, input="Hello", max_output_tokens=8)
    assert caught.value.code == "insufficient_quota"


def test_the_fallback_gets_it_as_chat_completions(gateway, fallback_stack):
    from tests.support import closed_port

    gateway.route(
        endpoint_url=f"http://127.0.0.1:{closed_port()}",
        fallback_base_url=f"{fallback_stack.url}/v1",
        fallback_model=FALLBACK_MODEL,
    )
    raw = client(gateway).responses.with_raw_response.create(model=MODEL, input="Hi", max_output_tokens=6)
    assert raw.headers["x-tandem-backend"] == "fallback"
    assert raw.headers["x-tandem-responses"] == "translated"
    response = raw.parse()
    assert response.output_text and response.usage.output_tokens > 0 and response.model == MODEL
