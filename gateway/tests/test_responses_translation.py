"""The Responses translation as pure functions: requests to chat completions, chat answers and chunks
back to Response objects and events (no network)."""

from __future__ import annotations

import json

import pytest

from gateway.errors import GatewayError
from gateway.responses.answer import Shell, from_chat
from gateway.responses.request import for_passthrough, to_chat
from gateway.responses.stream import StreamTranslator

NAMESPACE = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Sub-agents",
    "tools": [{"type": "function", "name": "close_agent", "parameters": {"type": "object"}}],
}


def test_codex_shaped_input_becomes_chat_messages_in_order():
    prepared = to_chat(
        {
            "model": "m",
            "instructions": "Top.",
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Dev."}]},
                {"role": "user", "content": [{"type": "input_text", "text": "Do it."}]},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
                {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"a":1}'},
                {"type": "function_call", "call_id": "c2", "name": "close_agent",
                 "namespace": "multi_agent_v1", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "one"},
                {"type": "function_call_output", "call_id": "c2",
                 "output": [{"type": "input_text", "text": "two"}]},
                {"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
            ],
            "tools": [{"type": "function", "name": "shell"}, NAMESPACE, {"type": "web_search"}],
        }
    )  # fmt: skip
    messages = prepared.chat["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    calls = messages[3]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["shell", "multi_agent_v1__close_agent"]
    assert messages[5] == {"role": "tool", "tool_call_id": "c2", "content": "two"}
    assert [t["function"]["name"] for t in prepared.chat["tools"]] == ["shell", "multi_agent_v1__close_agent"]
    assert prepared.dropped_tools == ["web_search"]
    assert prepared.namespaces == {"multi_agent_v1__close_agent": ("multi_agent_v1", "close_agent")}


def test_a_namespaced_call_comes_back_with_its_namespace():
    prepared = to_chat({"model": "m", "input": "x", "tools": [NAMESPACE]})
    call = {
        "id": "c9",
        "type": "function",
        "function": {"name": "multi_agent_v1__close_agent", "arguments": "{}"},
    }
    answer = {
        "choices": [{"message": {"role": "assistant", "tool_calls": [call]}, "finish_reason": "tool_calls"}]
    }
    item = from_chat(answer, Shell({"model": "m"}, "m"), prepared.namespaces)["output"][0]
    assert (item["type"], item["namespace"], item["name"], item["call_id"]) == (
        "function_call", "multi_agent_v1", "close_agent", "c9"
    )  # fmt: skip


def test_namespaced_tools_are_never_passed_through():
    assert for_passthrough({"model": "m", "input": "x", "tools": [NAMESPACE]}) is None
    body, dropped = for_passthrough({"model": "m", "input": "x", "tools": [{"type": "web_search"}]}) or (
        {},
        [],
    )
    assert body["tools"] == [] and dropped == ["web_search"]


@pytest.mark.parametrize(
    ("request_body", "param"),
    [
        ({"input": "x", "store": True}, "store"),
        ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": "x", "conversation": "conv_1"}, "conversation"),
        ({"input": "x", "background": True}, "background"),
        ({"input": "x", "top_p": 2}, "top_p"),
        ({"input": "x", "include": "all"}, "include"),
        ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
        ({"input": [{"type": "function_call", "name": "f"}]}, "input[0]"),
        ({"input": [{"type": "function_call_output"}]}, "input[0].call_id"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image"}]}]},
            "input[0].content[0].image_url",
        ),
        ({"input": []}, "input"),
    ],
)
def test_refusals_name_the_field(request_body, param):
    with pytest.raises(GatewayError) as caught:
        to_chat({"model": "m", **request_body})
    assert caught.value.status == 400 and caught.value.param == param


def test_settings_map_to_chat_fields():
    chat = to_chat(
        {
            "model": "m", "input": "x", "max_output_tokens": 9, "temperature": 0.5, "top_p": 0.5,
            "reasoning": {"effort": "high", "summary": "auto"}, "stream": True,
            "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}}},
            "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "f"},
            "parallel_tool_calls": False,
        }
    ).chat  # fmt: skip
    assert chat["max_tokens"] == 9 and chat["temperature"] == 0.5 and chat["top_p"] == 0.5
    assert chat["reasoning_effort"] == "high" and chat["stream_options"] == {"include_usage": True}
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "n", "schema": {"type": "object"}},
    }
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert chat["parallel_tool_calls"] is False


def events(raw: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]


def call(index: int, **fields: object) -> dict:
    return {"choices": [{"delta": {"tool_calls": [{"index": index, **fields}]}}]}


def test_reasoning_then_text_then_two_parallel_calls_stream_in_order():
    translator = StreamTranslator(Shell({"model": "m"}, "m"))
    out = translator.start()
    chunks = [
        {"choices": [{"delta": {"reasoning_content": "Think"}}]},
        {"choices": [{"delta": {"content": "Hi"}}]},
        call(0, id="a", function={"name": "f", "arguments": "{"}),
        call(0, function={"arguments": "}"}),
        call(1, id="b", function={"name": "g", "arguments": "{}"}),
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}},
    ]  # fmt: skip
    for chunk in chunks:
        out += translator.chunk(chunk)
    out += translator.finish_stream()
    seen = events(out)
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    done = [e["item"] for e in seen if e["type"] == "response.output_item.done"]
    assert [i["type"] for i in done] == ["reasoning", "message", "function_call", "function_call"]
    assert [e["output_index"] for e in seen if e["type"] == "response.output_item.added"] == [0, 1, 2, 3]
    assert done[2]["arguments"] == "{}" and done[3]["call_id"] == "b"
    final = seen[-1]
    assert final["type"] == "response.completed" and final["response"]["usage"]["input_tokens"] == 5
    assert [i["type"] for i in final["response"]["output"]] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]


def test_a_broken_stream_ends_failed_and_a_cut_one_incomplete():
    broken = StreamTranslator(Shell({"model": "m"}, "m"))
    broken.chunk({"choices": [{"delta": {"content": "Hi"}}]})
    failed = events(broken.fail("gone"))[-1]
    assert failed["type"] == "response.failed" and failed["response"]["error"]["message"] == "gone"
    assert failed["response"]["output"][0]["content"][0]["text"] == "Hi"
    cut = StreamTranslator(Shell({"model": "m"}, "m"))
    cut.chunk({"choices": [{"delta": {"content": "Hi"}, "finish_reason": "length"}]})
    last = events(cut.finish_stream())[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
