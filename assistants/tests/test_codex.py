"""Codex (`codex exec`) with the config.toml and auth.json Tandem's snippet shows, over /v1/responses."""

from __future__ import annotations

import json

from assistants.tests.conftest import binary, files, records
from keys import tokens
from tests.scripted_upstream import MARKER


def codex_env(assistant, snippet):
    for path, content in files(snippet).items():
        target = assistant.home / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return assistant.env(CODEX_HOME=str(assistant.home / ".codex"))


def exec_argv(prompt):
    return [
        binary("codex"),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
        "danger-full-access",
        prompt,
    ]


def test_a_turn_with_one_tool_round_trip_is_completed_and_recorded(assistant):
    env = codex_env(assistant, assistant.snippets["codex"])
    run = assistant.run(exec_argv(f"Run the shell command: echo {MARKER}"), env)
    assert run.returncode == 0, run
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    kinds = [e.get("type") for e in events]
    assert "turn.completed" in kinds, run
    done = next(e for e in events if e.get("type") == "turn.completed")
    assert done["usage"]["input_tokens"] > 0, done
    commands = [e["item"] for e in events if e.get("item", {}).get("type") == "command_execution"]
    assert commands and MARKER in commands[-1].get("aggregated_output", ""), commands
    messages = [e["item"] for e in events if e.get("item", {}).get("type") == "agent_message"]
    assert messages and "tandem-ok" in messages[-1]["text"], messages
    upstream = assistant.gateway.upstream.requests
    outputs = [m for r in upstream for m in r["messages"] if m["role"] == "tool"]
    assert outputs and MARKER in outputs[0]["content"], outputs
    rows = [r for r in records(assistant.gateway, 2) if r.endpoint == "responses"]
    assert len(rows) >= 2 and all(r.status == 200 and r.stream for r in rows), rows
    assert str(rows[0].key_id) == str(assistant.gateway.key.pk) and all(r.prompt_tokens > 0 for r in rows)


def test_a_wrong_key_is_a_readable_refusal_without_a_retry_storm(assistant):
    wrong = assistant.snippets_for(tokens.generate("inference"))["codex"]
    run = assistant.run(exec_argv("Say hello"), codex_env(assistant, wrong))
    assert run.returncode != 0, run
    assert run.seconds < 30, run
    said = run.stdout + run.stderr
    assert "401" in said or "Unauthorized" in said or "key" in said.lower(), run
    assert run.stdout.count("Reconnecting...") <= 5, run  # Codex's own bound on stream retries
