"""Qwen Code, opencode, the Cline CLI and aider over chat completions, each set up exactly as Tandem's
snippet shows (the test adds only what the snippet leaves to the user: approving the shell tool)."""

from __future__ import annotations

import json
import shlex

from assistants.tests.conftest import binary, exports, records
from keys import tokens
from tests.scripted_upstream import MARKER

PROMPT = f"Run the shell command: echo {MARKER}"


def tool_round_trip(assistant) -> None:
    upstream = assistant.gateway.upstream.requests
    outputs = [m for r in upstream for m in r["messages"] if m["role"] == "tool"]
    assert outputs and MARKER in json.dumps(outputs[0]["content"]), [r["messages"][-1] for r in upstream]


def recorded(assistant, count=2):
    rows = [r for r in records(assistant.gateway, count) if r.endpoint == "chat/completions"]
    assert len(rows) >= count and all(r.status == 200 for r in rows), [(r.status, r.error_code) for r in rows]
    assert str(rows[0].key_id) == str(assistant.gateway.key.pk)
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in rows)
    return rows


def snippet_command(text: str) -> list[str]:
    """The command line a snippet ends with (after its exports)."""
    return shlex.split([line for line in text.splitlines() if line and not line.startswith("export ")][-1])


# --- Qwen Code -------------------------------------------------------------------------------------------
def qwen(assistant, snippet: str, prompt: str):
    argv = snippet_command(snippet)
    assert argv[0] == "qwen"
    env = assistant.env(**exports(snippet))
    return assistant.run([binary("qwen"), *argv[1:], "--yolo", "--output-format", "json", prompt], env)


def test_qwen_code_turn_with_a_tool_round_trip(assistant):
    run = qwen(assistant, assistant.snippets["qwen-code"], PROMPT)
    assert run.returncode == 0, run
    result = [e for e in json.loads(run.stdout) if e.get("type") == "result"][-1]
    assert result["is_error"] is False and "tandem-ok" in result["result"], result
    assert result["usage"]["input_tokens"] > 0, result["usage"]
    tool_round_trip(assistant)
    recorded(assistant)


def test_qwen_code_wrong_key_is_one_readable_refusal(assistant):
    run = qwen(assistant, assistant.snippets_for(tokens.generate("inference"))["qwen-code"], "Say hello")
    assert run.returncode != 0 and run.seconds < 60, run
    assert "401" in run.stdout + run.stderr, run


# --- opencode --------------------------------------------------------------------------------------------
def opencode(assistant, snippet: str, prompt: str):
    (assistant.work / "opencode.json").write_text(snippet)
    approve = assistant.home / ".config" / "opencode" / "opencode.json"
    approve.parent.mkdir(parents=True, exist_ok=True)
    approve.write_text(
        json.dumps({"permission": {"bash": "allow"}, "autoupdate": False, "share": "disabled"})
    )
    model = json.loads(snippet)["model"]
    return assistant.run(
        [binary("opencode"), "run", "--format", "json", "-m", model, prompt], assistant.env()
    )


def test_opencode_turn_with_a_tool_round_trip(assistant):
    run = opencode(assistant, assistant.snippets["opencode"], PROMPT)
    assert run.returncode == 0, run
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    texts = [e["part"].get("text", "") for e in events if e.get("type") == "text"]
    assert any("tandem-ok" in t for t in texts), run
    steps = [e["part"] for e in events if e.get("type") == "step_finish"]
    assert steps and steps[0]["tokens"]["input"] > 0, steps
    tool_round_trip(assistant)
    recorded(assistant)


def test_opencode_wrong_key_is_a_readable_refusal(assistant):
    run = opencode(assistant, assistant.snippets_for(tokens.generate("inference"))["opencode"], "Say hello")
    assert run.seconds < 60, run
    said = run.stdout + run.stderr
    assert "not valid" in said or "401" in said, run


# --- Cline CLI -------------------------------------------------------------------------------------------
def cline(assistant, snippet: str, prompt: str):
    env = assistant.env()
    auth, _ = snippet.splitlines()
    argv = shlex.split(auth)
    assert argv[:2] == ["cline", "auth"]
    logged_in = assistant.run([binary("cline"), *argv[1:]], env, timeout=60)
    assert logged_in.returncode == 0, logged_in
    return assistant.run([binary("cline"), "--json", "--retries", "1", prompt], env)


def test_cline_cli_turn_with_a_tool_round_trip(assistant):
    run = cline(assistant, assistant.snippets["cline-cli"], PROMPT)
    assert run.returncode == 0, run
    assert "tandem-ok" in run.stdout, run
    tool_round_trip(assistant)
    recorded(assistant)


# --- aider -----------------------------------------------------------------------------------------------
def aider(assistant, snippet: str, prompt: str):
    argv = snippet_command(snippet)
    assert argv[0] == "aider"
    quiet = ["--yes-always", "--no-git", "--no-check-update", "--no-analytics", "--no-show-model-warnings"]
    env = assistant.env(**exports(snippet))
    return assistant.run([binary("aider"), *argv[1:], *quiet, "--message", prompt], env)


def test_aider_turn_is_completed_and_recorded(assistant):
    run = aider(assistant, assistant.snippets["aider"], "Say the marker word.")
    assert run.returncode == 0, run
    assert "tandem-ok" in run.stdout, run
    assert "Tokens:" in run.stdout, run  # aider prints the tokens the answer's usage says
    recorded(assistant, 1)


def test_aider_wrong_key_is_a_readable_refusal(assistant):
    run = aider(assistant, assistant.snippets_for(tokens.generate("inference"))["aider"], "Say hello")
    assert run.seconds < 60, run
    assert "not valid" in run.stdout + run.stderr or "401" in run.stdout + run.stderr, run


def test_cline_cli_wrong_key_is_a_readable_refusal(assistant):
    run = cline(assistant, assistant.snippets_for(tokens.generate("inference"))["cline-cli"], "Say hello")
    assert run.seconds < 60, run
    assert "not valid" in run.stdout + run.stderr or "401" in run.stdout + run.stderr, run
