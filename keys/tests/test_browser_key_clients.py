"""In a real Chromium: a coding-assistant key's shown-once dialog gives every client its settings with the
base URL that client expects, and each snippet's Copy button copies it exactly; the interactive API docs
take a management key through Authorize and send it with "Try it out". Screenshots go to var/screenshots/."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from keys.tests.test_browser_keys import log_in, off_the_loop
from tests.support import subprocess_env, uvicorn_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def console_problems(page: Any) -> list[str]:
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    return problems


def test_assistant_key_dialog_gives_each_client_its_base_url_and_copies_snippets_exactly(
    page, context, operator
):
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems = console_problems(page)
    page.set_viewport_size({"width": 1366, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    with uvicorn_server(subprocess_env(LOG_LEVEL="warning")) as base:
        log_in(page, base, operator.username)
        page.goto(f"{base}/keys/new/")
        page.click(".purpose-card[data-purpose=coding-assistant]")
        expect(page.locator("#id_kind")).to_have_value("inference")
        page.fill("#id_name", "claude-code-ada")
        page.fill("#id_allowed_models", "qwen3-32b")
        page.click("button:has-text('Create key')")

        expect(page.locator("#issued-title")).to_have_text("Key claude-code-ada created")
        secret = page.locator("#secret").inner_text().strip()
        assert re.fullmatch(r"tdm_i_[0-9A-Za-z]{36}", secret), secret
        expect(page.locator("#base-url")).to_have_text(f"{base}/v1")
        expect(page.locator("#model-id")).to_have_text("qwen3-32b")
        labels = page.locator(".snippet h3").all_inner_texts()
        assert labels == [
            "curl",
            "openai (Python SDK): chat completions and the Responses API",
            "anthropic (Python SDK): Messages",
            "Environment variables",
            "Claude Code 2.1.332 (environment; its small/fast model too)",
            "Codex 0.171.0 (~/.codex/config.toml and ~/.codex/auth.json)",
            "Cline 3.0.65 extension (OpenAI Compatible provider settings)",
            "Cline CLI 3.0.65",
            "opencode 1.18.33 (opencode.json in the project, or ~/.config/opencode/)",
            "Qwen Code 0.24.4",
            "aider 0.86.2",
        ], labels

        def copied(snippet: str) -> str:
            page.evaluate("navigator.clipboard.writeText('')")
            page.click(f"button[data-copy='snippet-{snippet}']")
            expect(page.locator(f"button[data-copy='snippet-{snippet}']")).to_have_text("Copied")
            text: str = page.evaluate("navigator.clipboard.readText()")
            assert text == page.locator(f"#snippet-{snippet}").inner_text(), snippet
            return text

        claude = copied("claude-code")
        assert f"export ANTHROPIC_BASE_URL={base}\n" in claude  # the root: Claude Code adds /v1/messages
        assert f"export ANTHROPIC_AUTH_TOKEN={secret}\n" in claude
        env = copied("env")
        assert f"export OPENAI_BASE_URL={base}/v1\n" in env and f"export OPENAI_API_KEY={secret}\n" in env
        cline = json.loads(copied("cline"))
        assert cline["openAiBaseUrl"] == f"{base}/v1" and cline["openAiApiKey"] == secret
        assert cline["openAiModelId"] == "qwen3-32b"
        codex = copied("codex")
        auth_json = codex.split("# ~/.codex/auth.json\n", 1)[1].split("\n\n", 1)[0]
        assert json.loads(auth_json) == {"OPENAI_API_KEY": secret}
        assert f'base_url = "{base}/v1"' in codex
        assert f"{base}/v1/chat/completions" in copied("curl")
        assert f'base_url="{base}/v1"' in copied("openai-python")
        page.screenshot(path=str(SHOTS / "keys-created-assistant-dialog.png"), full_page=True)
    assert not problems, f"browser console errors (CSP violations show here): {problems}"


def test_the_interactive_docs_send_a_key_given_to_authorize(page, viewer, operator):
    """A viewer's browser session opens the docs; the operator's key given to Authorize is what
    "Try it out" sends, so /me/ answers as the key's owner (the key wins over the session)."""
    from keys import services

    SHOTS.mkdir(parents=True, exist_ok=True)
    problems = console_problems(page)
    page.set_viewport_size({"width": 1366, "height": 900})
    secret = off_the_loop(
        lambda: (
            services.key_create(
                actor=operator, name="docs-try", purpose="automation", scopes=["topologies:read"]
            ).secret
        )
    )
    with uvicorn_server(subprocess_env(LOG_LEVEL="warning")) as base:
        log_in(page, base, viewer.username)
        page.goto(f"{base}/api/v1/docs/")
        page.wait_for_selector(".swagger-ui .information-container", timeout=15_000)
        page.click(".swagger-ui .auth-wrapper .authorize")
        dialog = page.locator(".swagger-ui .dialog-ux")
        expect(dialog).to_contain_text("bearerAuth")
        dialog.locator(".auth-container:has-text('bearerAuth') input").fill(secret)
        dialog.locator(".auth-container:has-text('bearerAuth') button.authorize").click()
        expect(dialog.locator(".auth-container:has-text('bearerAuth')")).to_contain_text("Authorized")
        page.screenshot(path=str(SHOTS / "api-docs-authorize.png"))
        dialog.locator("button.btn-done").first.click()

        operation = page.locator(".opblock-get:has(.opblock-summary-path[data-path='/api/v1/me/'])")
        operation.locator(".opblock-summary").click()
        operation.locator("button.try-out__btn").click()
        operation.locator("button.execute").click()
        response = operation.locator(".live-responses-table .response .response-col_status")
        expect(response.first).to_have_text("200", timeout=10_000)
        body = operation.locator(".live-responses-table .response-col_description pre.microlight").first
        answered = json.loads(body.inner_text())
        assert answered["username"] == operator.username, answered
        curl = operation.locator(".curl-command pre, .curl-command textarea").first.inner_text()
        assert f"Authorization: Bearer {secret}" in curl
        page.screenshot(path=str(SHOTS / "api-docs-try-with-key.png"), full_page=False)
    assert not problems, f"browser console errors (CSP violations show here): {problems}"
