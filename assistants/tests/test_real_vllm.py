"""The Responses API and a real client against a real vLLM 0.32 (CPU build, the real-engine lane's tiny
random-weight model) behind the gateway: the openai SDK's `responses.create`, streamed and not, passed
through to vLLM's own /v1/responses; and a Codex turn (Codex sends namespaced tools, so its requests are
translated to vLLM's chat completions with its function tools). The model's words are noise; what is
checked is that the real engine takes every request as the gateway sends it, that the client reads the
answer, and that it is counted and recorded.

Marked `real_engine`: it runs in `make real`, alone on the CPU.
"""

from __future__ import annotations

import json

import openai
import pytest

from assistants.tests.conftest import Assistant, binary, files, records
from realengine.engine import MODEL_NAME
from realengine.tests.conftest import real_vllm  # noqa: F401 - the lane's engine, started with ENGINE_FLAGS

pytestmark = pytest.mark.real_engine
# The lane's tool flags, and: a request without a token limit (Codex sends none) ends after this many
# tokens instead of at the context.
ENGINE_FLAGS = (
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    "--override-generation-config",
    json.dumps({"max_new_tokens": 48}),
)
SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Run a command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
}


@pytest.fixture
def on_real_vllm(assistant: Assistant, real_vllm: str) -> Assistant:  # noqa: F811
    """The assistant's gateway routed to the real vLLM itself (its topology's engine is vLLM)."""
    from gateway.services import route_update
    from topologies.models import Topology

    gateway = assistant.gateway
    Topology.objects.filter(pk=gateway.topology.pk).update(engine="vllm", model_name=MODEL_NAME)
    gateway.topology.refresh_from_db()
    route_update(topology=gateway.topology, changes={"endpoint_url": real_vllm}, actor=gateway.key.owner)
    import time

    time.sleep(1.2)  # gateway processes look for route changes twice a second
    return assistant


def test_the_openai_sdk_responses_pass_through_to_real_vllm(on_real_vllm):
    gateway = on_real_vllm.gateway
    client = openai.OpenAI(base_url=f"{gateway.base}/v1", api_key=gateway.secret, max_retries=0, timeout=120)
    raw = client.responses.with_raw_response.create(
        model="gpt-5-codex", input="Hello", tools=[SHELL], max_output_tokens=16, store=False
    )
    assert raw.headers["x-tandem-responses"] == "passthrough" and raw.headers["x-tandem-backend"] == "cluster"
    whole = raw.parse()
    assert whole.status in ("completed", "incomplete") and whole.usage.input_tokens > 0
    with client.responses.stream(
        model="gpt-5-codex", input="Hello", tools=[SHELL], max_output_tokens=16
    ) as s:
        kinds = [event.type for event in s]
        final = s.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] in ("response.completed", "response.incomplete")
    rows = [r for r in records(gateway, 2) if r.endpoint == "responses"]
    assert [r.status for r in rows] == [200, 200]
    assert rows[-1].prompt_tokens == final.usage.input_tokens and rows[-1].completion_tokens > 0


def test_a_codex_turn_reaches_real_vllm_and_reads_its_stream(on_real_vllm):
    """The tiny model never says it is done: vLLM stops it at the engine's token limit, the gateway ends
    the stream with `response.incomplete`, and Codex shows the engine's text and then says why the turn
    stopped (it fails a turn whose answer is incomplete)."""
    assistant = on_real_vllm
    for path, content in files(assistant.snippets["codex"]).items():
        target = assistant.home / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    env = assistant.env(CODEX_HOME=str(assistant.home / ".codex"))
    run = assistant.run(
        [binary("codex"), "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only", "Say hello"],
        env,
    )
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    said = [e["item"]["text"] for e in events if e.get("item", {}).get("type") == "agent_message"]
    assert said and said[0].strip(), run  # the real engine's words reached Codex
    failed = [e for e in events if e.get("type") == "turn.failed"]
    assert (
        failed and "Incomplete response returned, reason: max_output_tokens" in failed[0]["error"]["message"]
    )
    rows = [r for r in records(assistant.gateway, 1) if r.endpoint == "responses"]
    assert rows and all(r.status == 200 and r.backend == "cluster" and r.stream for r in rows), rows
    assert rows[0].prompt_tokens > 1000 and rows[0].completion_tokens == 48  # Codex's prompt, vLLM's count
