"""Where simulated answers end (end-of-sequence, max_tokens, ignore_eos, min_tokens) and the tool calls they
make: the pure rules, and the engine's routes refusing what vLLM 0.32 refuses without a tool parser."""

from __future__ import annotations

import json
import statistics

import aiohttp
import pytest

from sandbox.engine.farm import EngineFarm
from sandbox.engine.lengths import Length, natural_length, output_length
from sandbox.engine.testing import engine_spec, loopback_base
from sandbox.engine.tools import (
    NAMED,
    Tool,
    ToolChoice,
    arguments_for,
    chat_tools,
    messages_tools,
    plan_call,
    responses_tools,
    tool_choice_problem,
)

WEATHER = Tool(
    "get_weather",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "note": {"type": "string"},
        },
        "required": ["city", "days", "units", "where", "tags"],
    },
)


def test_natural_lengths_are_log_normal_around_a_few_hundred_tokens_and_repeatable():
    lengths = [natural_length(f"question {n}") for n in range(2000)]
    assert 200 <= statistics.median(lengths) <= 280
    assert min(lengths) >= 1 and max(lengths) > 1000  # a long tail
    assert lengths == [natural_length(f"question {n}") for n in range(2000)]
    assert natural_length("question 1", seed=1) != natural_length("question 1", seed=2)


def test_an_answer_ends_at_its_end_of_sequence_unless_the_cap_comes_first():
    assert output_length(natural=40, cap=100) == Length(40, at_eos=True)
    assert output_length(natural=400, cap=100) == Length(100, at_eos=False)
    assert output_length(natural=100, cap=100) == Length(100, at_eos=True)  # EOS was the 100th token


def test_ignore_eos_runs_to_the_cap_and_min_tokens_holds_eos_back():
    assert output_length(natural=40, cap=100, ignore_eos=True) == Length(100, at_eos=False)
    assert output_length(natural=40, cap=100, min_tokens=60) == Length(61, at_eos=True)
    assert output_length(natural=80, cap=100, min_tokens=60) == Length(80, at_eos=True)
    assert output_length(natural=40, cap=100, min_tokens=100) == Length(100, at_eos=False)


def test_arguments_fill_every_required_property_by_its_type():
    assert arguments_for(WEATHER.parameters) == {
        "city": "example", "days": 1, "units": "celsius", "where": {"lat": 1.0}, "tags": ["example"],
    }  # fmt: skip
    assert arguments_for({"type": "object", "properties": {"a": {"type": "string"}}}) == {}


def test_auto_calls_until_a_tool_result_comes_back():
    auto = ToolChoice("auto")
    first = plan_call((WEATHER,), auto, after_tool_result=False, auto_enabled=True)
    assert first is not None and first.name == "get_weather" and not first.named
    assert json.loads(first.arguments)["units"] == "celsius"
    assert plan_call((WEATHER,), auto, after_tool_result=True, auto_enabled=True) is None
    assert plan_call((WEATHER,), ToolChoice("none"), after_tool_result=False, auto_enabled=True) is None
    assert plan_call((), ToolChoice("required"), after_tool_result=False, auto_enabled=True) is None


def test_required_and_named_call_even_after_a_tool_result():
    other = Tool("get_time", {})
    required = plan_call((WEATHER, other), ToolChoice("required"), after_tool_result=True, auto_enabled=False)
    named = plan_call(
        (WEATHER, other), ToolChoice(NAMED, "get_time"), after_tool_result=True, auto_enabled=False
    )
    assert required is not None and required.name == "get_weather"
    assert named is not None and (named.name, named.arguments, named.named) == ("get_time", "{}", True)


def test_each_api_says_tools_choice_and_tool_results_its_own_way():
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    chat = {"tools": [tool], "messages": [{"role": "user"}, {"role": "tool", "content": "x"}]}
    assert chat_tools(chat) == ((Tool("f", {}),), ToolChoice("auto"), True)  # vLLM's default with tools
    named = {**chat, "tool_choice": {"type": "function", "function": {"name": "f"}}}
    assert chat_tools(named)[1] == ToolChoice(NAMED, "f")
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}
    anthropic = {
        "tools": [{"name": "f", "input_schema": {}}],
        "messages": [result],
        "tool_choice": {"type": "any"},
    }
    assert messages_tools(anthropic) == ((Tool("f", {}),), ToolChoice("required"), True)
    assert messages_tools({**anthropic, "tool_choice": None})[1] == ToolChoice("auto")
    responses = {"tools": [{"type": "function", "name": "f"}], "input": [{"type": "function_call_output"}]}
    assert responses_tools(responses) == ((Tool("f", {}),), ToolChoice("auto"), True)


def test_tool_choices_the_server_was_not_started_for_are_refused_in_vllms_words():
    assert tool_choice_problem(ToolChoice("required"), parser=False, auto_enabled=False) == (
        'tool_choice="required" requires --tool-call-parser to be set'
    )
    assert tool_choice_problem(ToolChoice(NAMED, "f"), parser=False, auto_enabled=False) == (
        'tool_choice=function "f" requires --tool-call-parser to be set'
    )
    assert tool_choice_problem(ToolChoice("auto"), parser=True, auto_enabled=False) == (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    )
    assert tool_choice_problem(ToolChoice("none"), parser=False, auto_enabled=False) is None
    assert tool_choice_problem(ToolChoice("required"), parser=True, auto_enabled=False) is None


@pytest.fixture
async def plain_engine():
    """An engine started without a tool parser (the default)."""
    farm = EngineFarm()
    spec = engine_spec("both", env={"SANDBOX_TIME_SCALE": "0.02"})
    await farm.start("ns/e-0", f"{loopback_base()}.2", spec, {})
    ip, port = farm.address("ns/e-0")
    yield f"http://{ip}:{port}"
    await farm.close()


async def test_without_a_tool_parser_chat_refuses_tools_and_responses_ignores_them(plain_engine):
    """What real vLLM 0.32 answered, started without --tool-call-parser / --enable-auto-tool-choice."""
    chat_tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    chat = {"messages": [{"role": "user", "content": "hi"}], "tools": [chat_tool], "max_tokens": 4}
    responses = {"input": "hi", "tools": [{"type": "function", "name": "f"}], "max_output_tokens": 4}
    answers = []
    async with aiohttp.ClientSession() as session:
        for path, body in [
            ("/v1/chat/completions", {**chat, "tool_choice": "required"}),
            ("/v1/chat/completions", chat),
            ("/v1/responses", {**responses, "tool_choice": "required"}),
        ]:
            async with session.post(f"{plain_engine}{path}", json=body) as response:
                answers.append((response.status, await response.json()))
    refused = {"type": "BadRequestError", "param": None, "code": 400}
    assert answers[0] == (400, {"error": {
        "message": 'tool_choice="required" requires --tool-call-parser to be set', **refused,
    }})  # fmt: skip
    assert answers[1] == (400, {"error": {
        "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        **refused,
    }})  # fmt: skip
    status, body = answers[2]
    assert status == 200 and body["status"] == "incomplete" and body["output"][0]["type"] == "message"
