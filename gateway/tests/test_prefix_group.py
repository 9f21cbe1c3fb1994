"""The prefix group: the same leading content, the same group on all three APIs; other content, another."""

from __future__ import annotations

from gateway.prefixgroup import PREFIX_CHARS, prefix_group

SYSTEM = "You are the billing assistant of Example Corp. Answer in two sentences."
OTHER = "You are a code reviewer. Point out bugs only."


def chat(system: str, user: str) -> dict:
    return {
        "model": "m",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }


def test_same_system_prompt_same_group_and_different_prompt_different_group() -> None:
    a = prefix_group(chat(SYSTEM, "Why was I charged twice?"))
    assert a == prefix_group(chat(SYSTEM, "Why was I charged twice?"))
    assert len(a) == 16 and int(a, 16) >= 0
    assert a != prefix_group(chat(OTHER, "Why was I charged twice?"))


def test_content_past_the_budget_does_not_change_the_group() -> None:
    long = "x" * PREFIX_CHARS
    assert prefix_group(chat(long, "first question")) == prefix_group(chat(long, "another question"))
    assert prefix_group(chat(SYSTEM, "first question")) != prefix_group(chat(SYSTEM, "another question"))


def test_the_three_apis_group_the_same_leading_content_alike() -> None:
    openai = prefix_group(chat(SYSTEM, "hi"))
    anthropic = prefix_group(
        {
            "model": "m",
            "system": [{"type": "text", "text": SYSTEM}],
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    responses = prefix_group({"model": "m", "instructions": SYSTEM, "input": "hi"})
    responses_items = prefix_group(
        {
            "model": "m",
            "instructions": SYSTEM,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        }
    )
    assert openai == anthropic == responses == responses_items
    assert prefix_group({"model": "m", "instructions": OTHER, "input": "hi"}) != responses


def test_bodies_without_text_have_no_group_and_odd_shapes_never_raise() -> None:
    assert prefix_group(None) == ""
    assert prefix_group({"model": "m"}) == ""
    assert prefix_group({"model": "m", "messages": 5, "system": 3}) == ""
    assert prefix_group({"model": "m", "messages": [None, {"role": "user", "content": {"x": 1}}]}) == ""
    assert prefix_group({"model": "m", "prompt": "complete me"}) != ""
