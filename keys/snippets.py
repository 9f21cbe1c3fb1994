"""Copy-ready client settings for a new secret: base URL, key and model id, exactly as each client wants.

A wrong base URL is the commonest cause of 401/404 and "reading choices" errors, so each snippet
spells the URL the way that client expects it: the OpenAI SDK and OPENAI_BASE_URL end in ``/v1``,
Anthropic's SDK and Claude Code take the server root and add ``/v1/messages`` themselves, curl gets
the full path. Each coding assistant's snippet names the release it was verified with: the
conformance suite (``assistants/tests``) runs that release with exactly this text (pure).

Clients that behave differently for model names they know (Claude Code sends Claude's names its own
request shape; Codex looks up a GPT name's context window) get the topology's alias of that family
when it has one (``aliases``), else the served model's name.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass

# The releases the conformance suite runs (assistants/install.py pins the same).
VERIFIED = {
    "claude-code": "2.1.332",
    "codex": "0.171.0",
    "opencode": "1.18.33",
    "qwen-code": "0.24.4",
    "cline": "3.0.65",
    "aider": "0.86.2",
}


@dataclass(frozen=True)
class Snippet:
    id: str
    label: str
    language: str
    text: str


def _root(base_url: str) -> str:
    return base_url.rstrip("/")


def _alias(model: str, aliases: tuple[str, ...], *prefixes: str) -> str:
    """The first alias of a family the client knows (claude-, gpt-, ...), else the model served."""
    return next((a for a in aliases if a.lower().startswith(prefixes)), model)


def _exports(pairs: dict[str, str]) -> str:
    return "\n".join(f"export {name}={shlex.quote(value)}" for name, value in pairs.items())


def _sdk_snippets(root: str, secret: str, model: str) -> list[Snippet]:
    v1 = f"{root}/v1"
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hello"}]})
    return [
        Snippet(
            "curl",
            "curl",
            "bash",
            f"curl {v1}/chat/completions \\\n  -H {shlex.quote('Authorization: Bearer ' + secret)} \\\n"
            f"  -H 'Content-Type: application/json' \\\n  -d {shlex.quote(body)}",
        ),
        Snippet(
            "openai-python",
            "openai (Python SDK): chat completions and the Responses API",
            "python",
            "from openai import OpenAI\n\n"
            f'client = OpenAI(base_url="{v1}", api_key="{secret}")\n'
            "reply = client.chat.completions.create(\n"
            f'    model="{model}",\n'
            '    messages=[{"role": "user", "content": "Say hello"}],\n'
            ")\n"
            "print(reply.choices[0].message.content)\n"
            f'response = client.responses.create(model="{model}", input="Say hello", store=False)\n'
            "print(response.output_text)",
        ),
        Snippet(
            "anthropic-python",
            "anthropic (Python SDK): Messages",
            "python",
            "from anthropic import Anthropic\n\n"
            f'client = Anthropic(base_url="{root}", api_key="{secret}")\n'
            "message = client.messages.create(\n"
            f'    model="{model}",\n'
            "    max_tokens=256,\n"
            '    messages=[{"role": "user", "content": "Say hello"}],\n'
            ")\n"
            "print(message.content[0].text)",
        ),
        Snippet(
            "env",
            "Environment variables",
            "bash",
            _exports({"OPENAI_BASE_URL": v1, "OPENAI_API_KEY": secret, "OPENAI_MODEL": model}),
        ),
    ]


def _assistant_snippets(root: str, secret: str, model: str, aliases: tuple[str, ...]) -> list[Snippet]:
    v1 = f"{root}/v1"
    claude = _alias(model, aliases, "claude")
    gpt = _alias(model, aliases, "gpt-", "o3", "o4", "codex")
    codex_config = (
        f'model = "{gpt}"\nmodel_provider = "tandem"\n\n[model_providers.tandem]\n'
        f'name = "Tandem"\nbase_url = "{v1}"\nwire_api = "responses"\n'
        "requires_openai_auth = true\n"
    )
    opencode = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "tandem": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Tandem",
                "options": {"baseURL": v1, "apiKey": secret},
                "models": {model: {"name": model}},
            }
        },
        "model": f"tandem/{model}",
    }
    cline_extension = {
        "apiProvider": "openai",
        "openAiBaseUrl": v1,
        "openAiApiKey": secret,
        "openAiModelId": model,
    }
    return [
        Snippet(
            "claude-code",
            f"Claude Code {VERIFIED['claude-code']} (environment; its small/fast model too)",
            "bash",
            _exports(
                {
                    "ANTHROPIC_BASE_URL": root,
                    "ANTHROPIC_AUTH_TOKEN": secret,
                    "ANTHROPIC_MODEL": claude,
                    "ANTHROPIC_DEFAULT_HAIKU_MODEL": claude,
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                }
            )
            + "\nclaude",
        ),
        Snippet(
            "codex",
            f"Codex {VERIFIED['codex']} (~/.codex/config.toml and ~/.codex/auth.json)",
            "text",
            "# ~/.codex/config.toml\n"
            + codex_config
            + "\n# ~/.codex/auth.json\n"
            + json.dumps({"OPENAI_API_KEY": secret}, indent=2),
        ),
        Snippet(
            "cline",
            f"Cline {VERIFIED['cline']} extension (OpenAI Compatible provider settings)",
            "json",
            json.dumps(cline_extension, indent=2),
        ),
        Snippet(
            "cline-cli",
            f"Cline CLI {VERIFIED['cline']}",
            "bash",
            f"cline auth -p openai -k {shlex.quote(secret)} -m {shlex.quote(model)} -b {shlex.quote(v1)}\n"
            "cline 'Say hello'",
        ),
        Snippet(
            "opencode",
            f"opencode {VERIFIED['opencode']} (opencode.json in the project, or ~/.config/opencode/)",
            "json",
            json.dumps(opencode, indent=2),
        ),
        Snippet(
            "qwen-code",
            f"Qwen Code {VERIFIED['qwen-code']}",
            "bash",
            _exports({"OPENAI_BASE_URL": v1, "OPENAI_API_KEY": secret, "OPENAI_MODEL": model})
            + "\nqwen --auth-type openai",
        ),
        Snippet(
            "aider",
            f"aider {VERIFIED['aider']}",
            "bash",
            _exports({"OPENAI_API_BASE": v1, "OPENAI_API_KEY": secret}) + f"\naider --model openai/{model}",
        ),
    ]


def inference_snippets(
    *, base_url: str, secret: str, model: str, purpose: str, aliases: tuple[str, ...] = ()
) -> list[Snippet]:
    root = _root(base_url)
    snippets = _sdk_snippets(root, secret, model)
    if purpose == "coding-assistant":
        snippets.extend(_assistant_snippets(root, secret, model, aliases))
    return snippets


def management_snippets(*, base_url: str, secret: str) -> list[Snippet]:
    root = _root(base_url)
    api = f"{root}/api/v1"
    return [
        Snippet(
            "curl",
            "curl",
            "bash",
            f"curl {api}/me/ -H {shlex.quote('Authorization: Bearer ' + secret)}",
        ),
        Snippet(
            "python",
            "Python (requests)",
            "python",
            "import requests\n\n"
            f'API = "{api}"\n'
            f'session = requests.Session()\nsession.headers["Authorization"] = "Bearer {secret}"\n'
            'print(session.get(f"{API}/topologies/").json())\n'
            '# deploy: session.post(f"{API}/topologies/<id>/deploy/", json={})',
        ),
        Snippet(
            "env",
            "Environment variables (CI secrets)",
            "bash",
            f"export TANDEM_API_URL={shlex.quote(api)}\nexport TANDEM_API_KEY={shlex.quote(secret)}",
        ),
    ]


def client_snippets(
    *, base_url: str, secret: str, kind: str, model: str, purpose: str, aliases: tuple[str, ...] = ()
) -> list[dict[str, str]]:
    if kind == "inference":
        found = inference_snippets(
            base_url=base_url, secret=secret, model=model, purpose=purpose, aliases=aliases
        )
    else:
        found = management_snippets(base_url=base_url, secret=secret)
    return [asdict(snippet) for snippet in found]
