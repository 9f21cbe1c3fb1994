"""A scripted OpenAI-compatible upstream: the edge the gateway talks to, for client conformance tests.

It serves ``/v1/chat/completions`` (streamed or not), ``/v1/models`` and vLLM's ``/tokenize``. Each
conversation goes: the first answer calls one of the tools the client offered (a shell tool, run
with ``echo``), and once a tool result is in the conversation, a final text. It counts prompt tokens
as about four characters a token, and keeps every request body it received (``requests``) so a test
can see what the gateway sent.

    python -m tests.scripted_upstream --port 8123 --model MODEL [--log requests.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

FINAL_TEXT = "The command printed tandem-ok."
MARKER = "tandem-ok"
# Shell tools of the clients, and the arguments that run `echo tandem-ok` in each.
SHELL_TOOLS: dict[str, dict[str, Any]] = {
    "Bash": {"command": f"echo {MARKER}", "description": "Print a marker"},
    "shell": {"command": ["echo", MARKER]},
    "exec_command": {"cmd": f"echo {MARKER}"},
    "shell_command": {"command": f"echo {MARKER}"},
    "run_shell_command": {"command": f"echo {MARKER}"},
    "bash": {"command": f"echo {MARKER}", "description": "Print a marker"},
    "execute_command": {"command": f"echo {MARKER}", "requires_approval": False},
    "run_commands": {"commands": [f"echo {MARKER}"]},
}


def _tool_names(request: dict[str, Any]) -> list[str]:
    names = []
    for tool in request.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name"):
            names.append(str(function["name"]))
    return names


def _has_tool_result(messages: list[Any]) -> bool:
    return any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)


def prompt_tokens(request: dict[str, Any]) -> int:
    size = len(json.dumps(request.get("messages") or [])) + len(json.dumps(request.get("tools") or []))
    return max(1, size // 4)


def script(request: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """(final text, or a tool call {id, name, arguments}) for this request."""
    messages = request.get("messages") or []
    names = _tool_names(request)
    shell = next((name for name in SHELL_TOOLS if name in names), None)
    if shell is None or _has_tool_result(messages):
        return FINAL_TEXT, None
    return None, {"id": f"call_{int(time.time() * 1000)}", "name": shell, "arguments": SHELL_TOOLS[shell]}


@dataclass
class Upstream:
    model: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    tokenized: list[int] = field(default_factory=list)
    log: str | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/tokenize", self.tokenize)
        return app

    async def tokenize(self, request: web.Request) -> web.Response:
        count = prompt_tokens(await request.json())
        self.tokenized.append(count)
        return web.json_response({"count": count, "max_model_len": 32768, "tokens": []})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        if self.log:
            with open(self.log, "a") as out:
                out.write(json.dumps(body) + "\n")
        text, call = script(body)
        usage = {"prompt_tokens": prompt_tokens(body), "completion_tokens": 7}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        finish = "tool_calls" if call else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if call:
                message["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
                    }
                ]
            return web.json_response(
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": self.model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)

        async def chunk(delta: dict[str, Any], reason: str | None = None) -> None:
            data = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
            }
            await response.write(f"data: {json.dumps(data)}\n\n".encode())

        await chunk({"role": "assistant", "content": ""})
        if call:
            arguments = json.dumps(call["arguments"])
            head = {"index": 0, "id": call["id"], "type": "function", "function": {"name": call["name"]}}
            await chunk({"tool_calls": [{**head, "function": {**head["function"], "arguments": ""}}]})
            middle = len(arguments) // 2
            for part in (arguments[:middle], arguments[middle:]):
                await chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
        else:
            for word in (text or "").split(" "):
                await chunk({"content": word + " "})
        await chunk({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            tail = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": usage,
            }
            await response.write(f"data: {json.dumps(tail)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response


async def _main(port: int, model: str, log: str | None) -> None:
    runner = web.AppRunner(Upstream(model=model, log=log).app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--log")
    args = parser.parse_args()
    asyncio.run(_main(args.port, args.model, args.log))
