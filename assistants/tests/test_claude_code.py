"""Claude Code (`claude -p`) with the environment Tandem's snippet shows, through the gateway."""

from __future__ import annotations

import json

from assistants.tests.conftest import binary, exports, records
from keys import tokens
from tests.scripted_upstream import MARKER


def test_a_turn_with_one_tool_round_trip_is_completed_and_recorded(assistant):
    env = assistant.env(**exports(assistant.snippets["claude-code"]))
    run = assistant.run(
        [binary("claude"), "-p", f"Run the shell command: echo {MARKER}", "--output-format", "json",
         "--allowedTools", "Bash(echo:*)"],
        env,
    )  # fmt: skip
    assert run.returncode == 0, run
    answer = json.loads(run.stdout)
    assert answer["is_error"] is False and "tandem-ok" in answer["result"], answer
    assert answer["num_turns"] >= 2, answer
    assert answer["usage"]["input_tokens"] > 0, answer["usage"]
    upstream = assistant.gateway.upstream.requests
    tool_results = [m for r in upstream for m in r["messages"] if m["role"] == "tool"]
    assert tool_results and MARKER in tool_results[0]["content"], tool_results
    rows = [r for r in records(assistant.gateway, 2) if r.endpoint == "messages"]
    assert rows and all(r.status == 200 for r in rows), [(r.endpoint, r.status, r.error_code) for r in rows]
    assert str(rows[0].key_id) == str(assistant.gateway.key.pk)
    assert sum(r.prompt_tokens for r in rows) > 0 and sum(r.completion_tokens for r in rows) > 0


def test_a_wrong_key_is_a_readable_refusal_without_a_retry_storm(assistant):
    wrong = exports(assistant.snippets_for(tokens.generate("inference"))["claude-code"])
    run = assistant.run(
        [binary("claude"), "-p", "Say hello", "--output-format", "json"], assistant.env(**wrong)
    )
    assert run.returncode != 0 or json.loads(run.stdout)["is_error"], run
    assert run.seconds < 30, run
    said = run.stdout + run.stderr
    assert "401" in said or "key" in said.lower(), run
