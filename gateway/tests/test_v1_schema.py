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
