"""The official anthropic SDK (as Claude Code uses the protocol) against the gateway."""

from __future__ import annotations

import time

import anthropic
import pytest

from gateway import anthropic as translate
from gateway.tests.conftest import MODEL


def client(gw, secret=None):
    return anthropic.Anthropic(base_url=gw.base, api_key=secret or gw.secret, max_retries=0, timeout=30)


def test_messages_through_the_cluster(gateway):
    raw = client(gateway).messages.with_raw_response.create(
        model=MODEL, max_tokens=8, system="Be brief.", messages=[{"role": "user", "content": "Hello"}]
    )
    assert raw.headers["x-tandem-backend"] == "cluster"
    message = raw.parse()
    assert message.role == "assistant" and message.content[0].type == "text" and message.content[0].text
    assert message.usage.output_tokens > 0 and message.stop_reason in ("end_turn", "max_tokens")


def test_messages_stream(gateway):
    with client(gateway).messages.stream(
        model=MODEL, max_tokens=6, messages=[{"role": "user", "content": "Count"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.content[0].text == text
    assert final.usage.output_tokens > 0


def test_bearer_token_as_claude_code_sends_it(gateway):
    c = anthropic.Anthropic(base_url=gateway.base, auth_token=gateway.secret, max_retries=0, timeout=30)
    assert c.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "Hi"}]).content


def test_errors_come_in_anthropics_format(gateway):
    with pytest.raises(anthropic.NotFoundError) as caught:
        client(gateway).messages.create(
            model="claude-x", max_tokens=4, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError):
        client(gateway).messages.create(
            model=MODEL, max_tokens=0, messages=[{"role": "user", "content": "x"}]
        )


def test_tool_use_round_trip_translation():
    request = {
        "model": "m",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "You are a coder."}],
        "tools": [{"name": "read_file", "description": "Read", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": "read_file"},
        "messages": [
            {"role": "user", "content": "Open a.py"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.py"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "print(1)"}],
            },
        ],
    }
    chat = translate.to_chat(request)
    assert chat["messages"][0] == {"role": "system", "content": "You are a coder."}
    assert chat["messages"][2]["tool_calls"][0]["function"] == {
        "name": "read_file",
        "arguments": '{"path": "a.py"}',
    }
    assert chat["messages"][3] == {"role": "tool", "tool_call_id": "t1", "content": "print(1)"}
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    answer = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "content": None,
                    "tool_calls": [
                        {"id": "c9", "function": {"name": "read_file", "arguments": '{"path": "b.py"}'}}
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
    }
    message = translate.from_chat(answer, "m")
    assert message["stop_reason"] == "tool_use"
    assert message["content"] == [
        {"type": "tool_use", "id": "c9", "name": "read_file", "input": {"path": "b.py"}}
    ]
    assert message["usage"] == {"input_tokens": 12, "output_tokens": 3}


def test_stream_translation_of_tool_calls():
    t = translate.StreamTranslator("m")
    out = t.start()
    out += t.chunk({"choices": [{"delta": {"content": "Let me look."}}]})
    out += t.chunk(
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c1", "function": {"name": "ls", "arguments": '{"p'}}
                        ]
                    }
                }
            ]
        }
    )
    out += t.chunk(
        {
            "choices": [
                {
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '": 1}'}}]},
                    "finish_reason": "tool_calls",
                }
            ]
        }
    )
    out += t.chunk({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7}})
    out += t.finish()
    text = out.decode()
    names = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("event: ")]
    assert names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert '"stop_reason": "tool_use"' in text and '"output_tokens": 7' in text


def test_a_rate_limit_comes_in_anthropics_format_with_the_limit(gateway, inference_key):
    limited = inference_key(name="tight-messages", limits_given={"requests_per_minute": 1})
    c = client(gateway, limited.secret)
    c.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
    with pytest.raises(anthropic.RateLimitError) as caught:
        c.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
    error = caught.value.body["error"]
    assert error["type"] == "rate_limit_error"
    assert error["limit"]["name"] == "requests_per_minute" and error["limit"]["value"] == 1
    assert error["limit"]["retry_after"] == int(caught.value.response.headers["retry-after"])


def claude_code_client(gw, secret=None):
    """As Claude Code calls: a bearer token, `?beta=true` on the path, `anthropic-beta` headers."""
    return anthropic.Anthropic(
        base_url=gw.base,
        auth_token=secret or gw.secret,
        max_retries=2,
        timeout=30,
        default_headers={"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"},
        default_query={"beta": "true"},
    )


def test_claude_code_shaped_turn_with_a_tool_round_trip(scripted_gateway):
    c = claude_code_client(scripted_gateway)
    bash = {
        "name": "Bash",
        "description": "Run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
    system = [
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
    ]
    history = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "run echo", "cache_control": {"type": "ephemeral"}}],
        },
        {"role": "system", "content": "The user's working directory is /tmp."},
    ]
    with c.messages.stream(
        model="claude-sonnet-4-5", max_tokens=256, system=system, messages=history, tools=[bash],
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:  # fmt: skip
        events = list(stream)
        first = stream.get_final_message()
    start = events[0]
    assert start.type == "message_start" and start.message.usage.input_tokens > 0
    assert first.stop_reason == "tool_use" and first.content[-1].type == "tool_use"
    assert first.content[-1].input == {"command": "echo tandem-ok", "description": "Print a marker"}
    sent = scripted_gateway.upstream.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "system"]
    assert sent[2]["content"] == "The user's working directory is /tmp."
    from tests.scripted_upstream import prompt_tokens

    assert first.usage.input_tokens == prompt_tokens(scripted_gateway.upstream.requests[-1])
    tool_use = first.content[-1]
    history += [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should run it.", "signature": "sig"},
                {"type": "tool_use", "id": tool_use.id, "name": "Bash", "input": tool_use.input},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "tandem-ok"}],
        },
    ]
    final = c.messages.create(
        model="claude-sonnet-4-5", max_tokens=256, system=system, messages=history, tools=[bash]
    )
    assert (
        final.stop_reason == "end_turn" and final.content[0].text.strip() == "The command printed tandem-ok."
    )
    assert final.usage.input_tokens > 0


def test_count_tokens_is_an_estimate_labelled_as_one_where_the_engine_cannot_count(gateway):
    raw = claude_code_client(gateway).messages.with_raw_response.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "Hello there, how are you today?"}]
    )
    assert raw.headers["x-tandem-token-count"] == "estimate"
    counted = raw.parse()
    assert counted.input_tokens > 0 and counted.model_extra == {"estimated": True}


def test_count_tokens_by_the_engine_where_it_serves_tokenize(scripted_gateway):
    raw = claude_code_client(scripted_gateway).messages.with_raw_response.count_tokens(
        model="claude-sonnet-4-5", messages=[{"role": "user", "content": "Hello"}]
    )
    assert raw.headers["x-tandem-token-count"] == "engine"
    assert raw.parse().input_tokens == scripted_gateway.upstream.tokenized[-1]


def test_a_wrong_key_is_refused_once_without_retries(gateway):
    from keys import tokens

    started = time.monotonic()
    with pytest.raises(anthropic.AuthenticationError) as caught:
        claude_code_client(gateway, tokens.generate("inference")).messages.create(
            model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "x"}]
        )
    assert time.monotonic() - started < 2, "the SDK retried a refusal it cannot mend"
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.body["error"]["type"] == "authentication_error"
    assert "key" in caught.value.body["error"]["message"]


def test_an_unknown_role_names_the_message(gateway):
    with pytest.raises(anthropic.BadRequestError) as caught:
        client(gateway).messages.create(
            model=MODEL,
            max_tokens=4,
            messages=[{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}],
        )
    assert "messages.1.role" in caught.value.message
