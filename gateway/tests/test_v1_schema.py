"""The OpenAPI document's other /v1/ endpoints hold what is really served: a real vLLM's recorded answers
(the engine's shapes the gateway passes through) and the gateway's own answers, events and errors."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import requests

from gateway import openapi, openapi_v1
from gateway.tests.conftest import MODEL

VLLM = Path(__file__).resolve().parents[2] / "telemetry" / "tests" / "data" / "vllm-0.32.0"
SCHEMAS = {**openapi.COMPONENTS, **openapi_v1.COMPONENTS}


def check(instance, name):
    schema = {"$ref": f"{openapi.REF}{name}", "components": {"schemas": SCHEMAS}}
    jsonschema.Draft202012Validator(schema).validate(instance)


def sse_data(text):
    out = []
    for block in text.split("\n\n"):
        data = "".join(line[6:] for line in block.splitlines() if line.startswith("data: "))
        if data and data != "[DONE]":
            out.append(json.loads(data))
    return out


@pytest.mark.parametrize(
    ("recorded", "name"),
    [
        ("chat.200.json", "ChatCompletion"),
        ("completion.200.json", "Completion"),
        ("error-max-tokens.400.json", "EngineError"),
        ("error-prompt-too-long.400.json", "EngineError"),
        ("error-unknown-model.404.json", "EngineError"),
    ],
)
def test_a_real_vllms_answers_match_the_document(recorded, name):
    check(json.loads((VLLM / recorded).read_text()), name)


def test_a_real_vllms_stream_matches_the_document():
    chunks = sse_data((VLLM / "chat-stream.200.sse").read_text())
    assert chunks
    for chunk in chunks:
        check(chunk, "ChatCompletionChunk")


def test_the_gateways_answers_match_the_document(scripted_gateway):
    gw = scripted_gateway
    auth = {"Authorization": f"Bearer {gw.secret}"}

    def post(path, body, **kwargs):
        return requests.post(f"{gw.base}{path}", json=body, headers=auth, timeout=30, **kwargs)

    chat = {"model": MODEL, "messages": [{"role": "user", "content": "run echo"}], "max_tokens": 16}
    check(chat, "ChatCompletionRequest")
    whole = post("/v1/chat/completions", chat)
    assert whole.status_code == 200
    check(whole.json(), "ChatCompletion")
    streamed = post("/v1/chat/completions", {**chat, "stream": True})
    assert streamed.text.rstrip().endswith("data: [DONE]")
    for chunk in sse_data(streamed.text):
        check(chunk, "ChatCompletionChunk")
    models = requests.get(f"{gw.base}/v1/models", headers=auth, timeout=30)
    check(models.json(), "ModelList")

    message = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "run echo"}]}
    check(message, "MessagesRequest")
    answer = post("/v1/messages", message)
    assert answer.status_code == 200
    check(answer.json(), "MessagesResponse")
    events = sse_data(post("/v1/messages", {**message, "stream": True}).text)
    assert [e["type"] for e in events][:1] == ["message_start"]
    for event in events:
        check(event, "MessagesStreamEvent")
    counted = post("/v1/messages/count_tokens", {"model": MODEL, "messages": message["messages"]})
    check(counted.json(), "MessagesCountTokens")

    wrong = {"Authorization": "Bearer tdm_i_not-a-key"}
    refused = requests.post(f"{gw.base}/v1/chat/completions", json=chat, headers=wrong, timeout=30)
    assert refused.status_code == 401
    check(refused.json(), "GatewayError")
    check(refused.json(), "EngineError")
    refused = requests.post(f"{gw.base}/v1/messages", json=message, headers=wrong, timeout=30)
    assert refused.status_code == 401
    check(refused.json(), "AnthropicError")


def sse_events(text):
    """Each event as an SSE client reads it: its `event` and `data` fields (data lines joined)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data" and "data" in fields:
                fields["data"] += "\n" + value
            elif name in ("event", "data", "id"):
                fields[name] = value
        if "data" in fields:
            events.append(fields)
    return events


@pytest.mark.parametrize(
    ("recorded", "path"),
    [
        ("chat-stream.200.sse", "/v1/chat/completions"),
        ("messages-stream.200.sse", "/v1/messages"),
        ("responses-stream.200.sse", "/v1/responses"),
    ],
)
def test_a_streams_events_match_the_documented_event_stream(recorded, path):
    """The text/event-stream schema describes each event as a client reads it (as OpenAPI 3.2's
    itemSchema does and schemathesis validates), its data the named component as JSON."""
    operation = {**openapi_v1.paths(), "/v1/responses": {"post": openapi.responses_operation()}}[path]
    schema = operation["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    events = sse_events((VLLM / recorded).read_text())
    assert events
    for event in events:
        jsonschema.Draft202012Validator({**schema, "components": {"schemas": SCHEMAS}}).validate(event)
        if event["data"] != "[DONE]":
            check(json.loads(event["data"]), schema["x-data-schema"].rsplit("/", 1)[-1])
