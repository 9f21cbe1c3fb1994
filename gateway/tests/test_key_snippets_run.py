"""The client snippets shown with a new coding-assistant key work exactly as shown, against the live
server and gateway: curl and the openai SDK as written, the environment variables as the openai SDK
reads them, Cline's and Codex's settings as those clients use them, and Claude Code's environment as
the anthropic SDK reads it (root URL, it adds /v1/messages itself). A wrong base URL fails here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import requests

from gateway.tests.conftest import MODEL
from tests.support import ROOT, subprocess_env

PASSWORD = "correct-horse-battery"


def issued_through_the_api(base: str, username: str) -> dict:
    """Log in as a browser would and create the key through the REST API: the snippets come back once."""
    session = requests.Session()
    page = session.get(f"{base}/accounts/login/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    landed = session.post(
        f"{base}/accounts/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{base}/"},
        timeout=10,
    )
    assert landed.url == f"{base}/", landed.url
    created = session.post(
        f"{base}/api/v1/keys/",
        json={"name": "claude-code-ada", "purpose": "coding-assistant", "allowed_models": [MODEL]},
        headers={"X-CSRFToken": session.cookies["csrftoken"], "Referer": f"{base}/"},
        timeout=10,
    )
    assert created.status_code == 201, created.text
    return created.json()


def run(command: list[str], script: str = "") -> str:
    done = subprocess.run(
        command,
        input=script,
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    return done.stdout


def python(script: str) -> str:
    return run([sys.executable, "-"], script)


def bash_then_python(exports: str, script: str) -> str:
    """The exports as a shell runs them, then Python in that environment."""
    return run(["bash", "-c", f'{exports}\nexec "$0" -c "$1"', sys.executable, script])


def test_every_snippet_of_a_coding_assistant_key_works_as_shown(gateway, admin_user):
    admin_user.set_password(PASSWORD)
    admin_user.save()
    body = issued_through_the_api(gateway.base, admin_user.username)
    assert body["base_url"] == gateway.base and body["model"] == MODEL
    snippets = {s["id"]: s["text"] for s in body["snippets"]}
    assert set(snippets) == {
        "curl", "openai-python", "anthropic-python", "env", "claude-code", "codex", "cline", "cline-cli",
        "opencode", "qwen-code", "aider",
    }  # fmt: skip
    secret = body["secret"]

    # curl, pasted into a shell
    answer = json.loads(run(["bash", "-c", snippets["curl"]]))
    assert answer["choices"][0]["message"]["content"], answer

    # the openai SDK snippet (chat completions, then the Responses API) and the anthropic SDK's, as written
    assert len(python(snippets["openai-python"]).strip().splitlines()) >= 2
    assert python(snippets["anthropic-python"]).strip()

    # environment variables: the openai SDK reads OPENAI_BASE_URL and OPENAI_API_KEY by itself
    reads_env = (
        "import os\nfrom openai import OpenAI\n"
        "reply = OpenAI(max_retries=0).chat.completions.create(model=os.environ['OPENAI_MODEL'], "
        "messages=[{'role': 'user', 'content': 'Say hello'}], max_tokens=8)\n"
        "print(reply.choices[0].message.content)"
    )
    assert bash_then_python(snippets["env"], reads_env).strip()

    # Cline's OpenAI Compatible provider calls the OpenAI SDK with these three settings
    cline = json.loads(snippets["cline"])
    assert cline["openAiApiKey"] == secret
    as_cline = (
        "from openai import OpenAI\n"
        f"client = OpenAI(base_url={cline['openAiBaseUrl']!r}, api_key={cline['openAiApiKey']!r},"
        " max_retries=0)\n"
        f"print(client.chat.completions.create(model={cline['openAiModelId']!r}, "
        "messages=[{'role': 'user', 'content': 'hi'}], max_tokens=8).choices[0].message.content)"
    )
    assert python(as_cline).strip()

    # Codex: auth.json's key, sent to the provider's {base_url}/responses (wire_api responses; the
    # assistants suite runs Codex itself with these two files)
    config_toml, auth_json = snippets["codex"].split("# ~/.codex/auth.json\n", 1)
    auth = json.loads(auth_json)
    config = tomllib.loads(config_toml.split("# ~/.codex/config.toml\n", 1)[1])
    provider = config["model_providers"][config["model_provider"]]
    assert provider["wire_api"] == "responses"
    # Codex takes a custom provider's key from auth.json only when it requires OpenAI auth; with an
    # env_key it would read that environment variable instead and ignore auth.json.
    assert provider["requires_openai_auth"] is True and "env_key" not in provider
    codex_call = requests.post(
        f"{provider['base_url']}/responses",
        headers={"Authorization": f"Bearer {auth['OPENAI_API_KEY']}"},
        json={"model": config["model"], "input": "hi", "max_output_tokens": 8, "store": False},
        timeout=30,
    )
    assert codex_call.status_code == 200, codex_call.text

    # Claude Code's environment, as the anthropic SDK reads it (the snippet's last line starts claude)
    exports = snippets["claude-code"].rsplit("\nclaude", 1)[0]
    reads_anthropic_env = (
        "import os, anthropic\n"
        "reply = anthropic.Anthropic(max_retries=0).messages.create(model=os.environ['ANTHROPIC_MODEL'], "
        "max_tokens=8, messages=[{'role': 'user', 'content': 'Say hello'}])\n"
        "print(reply.content[0].text)"
    )
    assert bash_then_python(exports, reads_anthropic_env).strip()
