"""Copy-ready client settings for a new secret: base URL, key and model id, exactly as each client wants.

A wrong base URL is the commonest cause of 401/404 and "reading choices" errors, so each snippet
spells the URL the way that client expects it: the OpenAI SDK and OPENAI_BASE_URL end in ``/v1``,
Anthropic's SDK and Claude Code take the server root and add ``/v1/messages`` themselves, curl gets
the full path (pure).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Snippet:
    id: str
    label: str
    language: str
    text: str


def _root(base_url: str) -> str:
    return base_url.rstrip("/")


def inference_snippets(*, base_url: str, secret: str, model: str, purpose: str) -> list[Snippet]:
    root = _root(base_url)
    v1 = f"{root}/v1"
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hello"}]})
    snippets = [
        Snippet(
            "curl",
            "curl",
            "bash",
            f"curl {v1}/chat/completions \\\n  -H {shlex.quote('Authorization: Bearer ' + secret)} \\\n"
            f"  -H 'Content-Type: application/json' \\\n  -d {shlex.quote(body)}",
        ),
        Snippet(
            "openai-python",
            "openai (Python SDK)",
            "python",
            "from openai import OpenAI\n\n"
            f'client = OpenAI(base_url="{v1}", api_key="{secret}")\n'
            "reply = client.chat.completions.create(\n"
            f'    model="{model}",\n'
            '    messages=[{"role": "user", "content": "Say hello"}],\n'
            ")\n"
            "print(reply.choices[0].message.content)",
        ),
        Snippet(
            "env",
            "Environment variables",
            "bash",
            f"export OPENAI_BASE_URL={shlex.quote(v1)}\nexport OPENAI_API_KEY={shlex.quote(secret)}\n"
            f"export OPENAI_MODEL={shlex.quote(model)}",
        ),
        Snippet(
            "cline",
            "Cline (OpenAI Compatible provider settings)",
            "json",
            json.dumps(
                {
                    "apiProvider": "openai",
                    "openAiBaseUrl": v1,
                    "openAiApiKey": secret,
                    "openAiModelId": model,
                },
                indent=2,
            ),
        ),
        Snippet(
            "codex",
            "Codex (~/.codex/auth.json, and the provider in ~/.codex/config.toml)",
            "text",
            "# ~/.codex/auth.json\n"
            + json.dumps({"OPENAI_API_KEY": secret}, indent=2)
            + "\n\n# ~/.codex/config.toml\n"
            f'model = "{model}"\nmodel_provider = "tandem"\n\n[model_providers.tandem]\n'
            f'name = "Tandem"\nbase_url = "{v1}"\nwire_api = "chat"\n'
            "requires_openai_auth = true  # the key comes from auth.json, not an environment variable",
        ),
    ]
    if purpose == "coding-assistant":
        snippets.append(
            Snippet(
                "claude-code",
                "Claude Code (environment)",
                "bash",
                f"export ANTHROPIC_BASE_URL={shlex.quote(root)}\n"
                f"export ANTHROPIC_AUTH_TOKEN={shlex.quote(secret)}\n"
                f"export ANTHROPIC_MODEL={shlex.quote(model)}\nclaude",
            )
        )
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
    *, base_url: str, secret: str, kind: str, model: str, purpose: str
) -> list[dict[str, str]]:
    if kind == "inference":
        found = inference_snippets(base_url=base_url, secret=secret, model=model, purpose=purpose)
    else:
        found = management_snippets(base_url=base_url, secret=secret)
    return [asdict(snippet) for snippet in found]
